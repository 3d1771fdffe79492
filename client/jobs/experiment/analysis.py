"""Analysis of ``results.jsonl``: paired differences, the pre-registered verdicts, plots.

Example::

    python -m forkgate.jobs.experiment.analysis docs/results/exp18/results.jsonl \
        docs/results/exp18/seed*/results.jsonl --out docs/results/exp18

Differences are paired by seed (both arms ran the seed with the same tasks and sampling
seeds): for arms A and B and a metric, ``d_s = M_A(s) − M_B(s)``; the report gives the mean,
a 95% t interval (``mean ± t_{0.975, n−1} · sd / √n``) and a 95% percentile bootstrap over
seeds (2,000 resamples, fixed seed). Points are ×100 (EC@16 0.43 → 43 points).

The criteria of issue 18, fixed before the runs (``verdicts``):

* **Confirmed** — stratified-v2 beats both "GRPO, entry unscored" and "GRPO + replay" by ≥ 3
  EC@16 points with the t interval excluding 0, at matched pass@1 (the Δpass@1 t interval
  within ±1 point), recovers ≥ 50% of GRPO's EC@16 drop from the start, and balanced replay
  beats unbalanced replay by ≥ 3 points (interval excluding 0).
* **Refuted** — the upper bound of stratified-v2 − "GRPO, entry unscored" (EC@16) is below
  +1.5 points at matched pass@1.
* Anything else is **between**; missing arms or fewer than 2 paired seeds are
  **insufficient data**.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import matched
from .frontier import frontier_analysis, frontier_markdown
from .matched import matched_comparison
from .stats import interval

__all__ = ["intervention_summary", "load", "paired", "pareto", "verdicts", "write_analysis"]

STRAT, UNSCORED, REPLAY, UNBAL, GRPO = (
    "strat-v2", "grpo-unscored", "grpo+replay", "grpo+unbal-replay", "grpo",
)  # fmt: skip


def load(
    paths: Path | Sequence[Path], config: str | None = None
) -> dict[str, dict[int, dict[str, Any]]]:
    """``{arm: {seed: record}}`` of one configuration (default: the most frequent one).

    Several files (seeds run side by side in separate workdirs) are read in order; the first
    record of an (arm, seed) wins. A torn last line is skipped.
    """
    recs = []
    for path in [paths] if isinstance(paths, Path) else paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    if config is None and recs:
        counts: dict[str, int] = {}
        for r in recs:
            counts[r["config"]] = counts.get(r["config"], 0) + 1
        config = max(counts, key=lambda k: counts[k])
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for r in recs:
        if r["config"] == config:
            out.setdefault(r["arm"], {}).setdefault(int(r["seed"]), r)
    return out


def paired(
    runs: Mapping[str, Mapping[int, Mapping[str, Any]]], a: str, b: str, metric: str
) -> dict[str, Any] | None:
    """Paired difference A − B in points, with t and bootstrap intervals; None if < 2 seeds."""
    seeds = sorted(set(runs.get(a, {})) & set(runs.get(b, {})))
    if len(seeds) < 2:
        return None
    d = [100 * (runs[a][s]["end"][metric] - runs[b][s]["end"][metric]) for s in seeds]
    return {"a": a, "b": b, "metric": metric, **interval(d)}


def _matched(p: Mapping[str, Any] | None) -> bool:
    return p is not None and -1.0 <= p["t95"][0] and p["t95"][1] <= 1.0


def _recovery(runs: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> float | None:
    """Mean over seeds of (EC_v2 − EC_grpo) / (EC_start − EC_grpo)."""
    seeds = sorted(set(runs.get(STRAT, {})) & set(runs.get(GRPO, {})) & set(runs.get("start", {})))
    vals = []
    for s in seeds:
        start, g = runs["start"][s]["end"]["EC@16"], runs[GRPO][s]["end"]["EC@16"]
        if start - g > 1e-9:
            vals.append((runs[STRAT][s]["end"]["EC@16"] - g) / (start - g))
    return round(sum(vals) / len(vals), 3) if vals else None


def verdicts(runs: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> dict[str, Any]:
    """Each pre-registered criterion evaluated mechanically, and the overall verdict."""
    ec_u, ec_r = paired(runs, STRAT, UNSCORED, "EC@16"), paired(runs, STRAT, REPLAY, "EC@16")
    p1_u, p1_r = paired(runs, STRAT, UNSCORED, "pass@1"), paired(runs, STRAT, REPLAY, "pass@1")
    bal = paired(runs, REPLAY, UNBAL, "EC@16")
    rec = _recovery(runs)

    def beats(p: Mapping[str, Any] | None) -> bool | None:
        return None if p is None else p["mean"] >= 3 and p["t95"][0] > 0

    crit = {
        "v2 beats unscored by >=3 EC@16 pts, CI excl. 0": beats(ec_u),
        "v2 beats grpo+replay by >=3 EC@16 pts, CI excl. 0": beats(ec_r),
        "pass@1 matched (both Δ t95 within ±1 pt)": None
        if p1_u is None or p1_r is None
        else _matched(p1_u) and _matched(p1_r),
        "v2 recovers >=50% of GRPO's EC@16 drop": None if rec is None else rec >= 0.5,
        "balanced replay beats unbalanced by >=3 pts, CI excl. 0": beats(bal),
    }
    if ec_u is None or p1_u is None:
        overall = "insufficient data"
    elif all(v is True for v in crit.values()):
        overall = "Confirmed"
    elif ec_u["t95"][1] < 1.5 and _matched(p1_u):
        overall = "Refuted"
    else:
        overall = "between"
    return {
        "criteria": crit, "overall": overall, "recovery": rec,
        "refute_bound": None if ec_u is None else ec_u["t95"][1],
        "pairs": [p for p in (ec_u, ec_r, p1_u, p1_r, bal) if p is not None],
    }  # fmt: skip


def pareto(runs: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Mean (pass@1, EC@16) per arm over its seeds, with the non-dominated ones marked."""
    pts = []
    for arm, by_seed in sorted(runs.items()):
        ends = [r["end"] for r in by_seed.values()]
        p1 = sum(e["pass@1"] for e in ends) / len(ends)
        ec = sum(e["EC@16"] for e in ends) / len(ends)
        pts.append({"arm": arm, "pass@1": round(p1, 4), "EC@16": round(ec, 4), "n": len(ends)})
    for p in pts:
        p["frontier"] = not any(
            q["pass@1"] >= p["pass@1"] and q["EC@16"] >= p["EC@16"] and q != p
            and (q["pass@1"] > p["pass@1"] or q["EC@16"] > p["EC@16"])
            for q in pts
        )  # fmt: skip
    return pts


def table(
    runs: Mapping[str, Mapping[int, Mapping[str, Any]]], metrics: Sequence[str]
) -> list[dict[str, Any]]:
    """Per arm: seeds, mean of each metric, and its paired difference from GRPO (points)."""
    rows = []
    for arm, by_seed in sorted(runs.items()):
        row: dict[str, Any] = {"arm": arm, "seeds": sorted(by_seed)}
        for m in metrics:
            vals = [r["end"][m] for r in by_seed.values()]
            row[m] = round(sum(vals) / len(vals), 4)
            if arm != GRPO:
                row[f"Δ{m} vs grpo"] = paired(runs, arm, GRPO, m)
        rows.append(row)
    return rows


def _plots(out: Path, tab: Sequence[Mapping[str, Any]], front: Sequence[Mapping[str, Any]]) -> None:
    from ..plotting import pyplot

    plt = pyplot()

    rows = [r for r in tab if r.get("ΔEC@16 vs grpo")]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, r in enumerate(rows):
        for j, m in enumerate(("EC@16", "pass@1")):
            p = r[f"Δ{m} vs grpo"]
            lo, hi = p["t95"]
            ax.errorbar(
                i + 0.2 * j,
                p["mean"],
                yerr=[[p["mean"] - lo], [hi - p["mean"]]],
                fmt="o",
                color=f"C{j}",
                label=m if i == 0 else None,
            )
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(range(len(rows)), [r["arm"] for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("paired Δ vs GRPO (points, t95)")
    if rows:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "paired_vs_grpo.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for p in front:
        ax.scatter(p["pass@1"], p["EC@16"], color="C3" if p["frontier"] else "C0")
        ax.annotate(p["arm"], (p["pass@1"], p["EC@16"]), fontsize=7)
    ax.set_xlabel("pass@1")
    ax.set_ylabel("EC@16")
    ax.set_title("pass@1 vs EC@16 (red: non-dominated)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "pareto.png", dpi=110)
    plt.close(fig)


def _pooled(ivs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Intervention records of several seeds pooled: rates over the summed samples (None
    where no sample counts: no entry into the families, or no pairs)."""
    hits = sum(iv["free_hits"] for iv in ivs)
    forced_n = sum(iv["forced_samples"] for iv in ivs)
    free_ok = sum((iv["free"] or 0.0) * iv["free_hits"] for iv in ivs)
    forced_ok = sum((iv["forced"] or 0.0) * iv["forced_samples"] for iv in ivs)
    pis = [iv["mean_pi"] for iv in ivs if iv["mean_pi"] is not None]
    return {
        "pairs": sum(iv["pairs"] for iv in ivs),
        "mean_pi": round(sum(pis) / len(pis), 5) if pis else None,
        "free": round(free_ok / hits, 4) if hits else None,
        "free_hits": hits,
        "forced": round(forced_ok / forced_n, 4) if forced_n else None,
        "forced_samples": forced_n,
    }


def intervention_summary(runs: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> dict[str, Any]:
    """Per trained arm: the intervention under the end and the starting policy on the same
    pairs, pooled over seeds, and the paired change of the forced completion rate (points)."""
    out: dict[str, Any] = {}
    for arm, by_seed in sorted(runs.items()):
        recs = [r for _, r in sorted(by_seed.items()) if "intervention_start" in r]
        if not recs or "free_hits" not in recs[0]["intervention"]:
            continue  # the start record, or the first runs' end-only intervention
        end = [r["intervention"] for r in recs]
        start = [r["intervention_start"] for r in recs]
        row: dict[str, Any] = {"seeds": len(recs), "end": _pooled(end), "start": _pooled(start)}
        pairs = [(e, s) for e, s in zip(end, start, strict=True) if e["forced"] is not None]
        if len(pairs) >= 2 and all(s["forced"] is not None for _, s in pairs):
            row["Δforced"] = interval([100 * (e["forced"] - s["forced"]) for e, s in pairs])
        out[arm] = row
    return out


METRICS = (
    "pass@1",
    "pass@16",
    "EC@16",
    "reach@16",
    "feasible_entropy",
    "feasible_mass",
    "entry_entropy",
)


def write_analysis(
    results: Path | Sequence[Path],
    out: Path,
    *,
    plots: bool = True,
    budget_arm: str = UNSCORED,
    budget: float | None = None,
    pairs: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """Write ``analysis.json`` (and the plots) next to ``out``; return the analysis.

    ``pairs``: further (A, B) arms whose paired differences (EC@16, pass@1) a report quotes.
    """
    runs = load(results)
    tab = table(runs, METRICS)
    doc: dict[str, Any] = {"arms": tab, "verdicts": verdicts(runs), "pareto": pareto(runs)}
    doc["more_pairs"] = [
        p for a, b in pairs for m in ("EC@16", "pass@1") if (p := paired(runs, a, b, m))
    ]
    doc["run_time"] = _run_time(runs)
    doc["interventions"] = {
        a: [r["intervention"] for _, r in sorted(s.items())] for a, s in runs.items()
    }
    doc["interventions_start"] = {
        a: [r["intervention_start"] for _, r in sorted(s.items()) if "intervention_start" in r]
        for a, s in runs.items()
    }
    doc["intervention_summary"] = intervention_summary(runs)
    doc["matched"] = matched_comparison(runs, ref=budget_arm, budget=budget)
    if any("interp" in r for by_seed in runs.values() for r in by_seed.values()):
        doc["frontier"] = frontier_analysis(runs)  # issue 33's primary outcome
    if any("end_tasks" not in r for by_seed in runs.values() for r in by_seed.values()):
        doc["ec_estimator"] = "plug-in over n draws"  # records made before issue 33
    out.mkdir(parents=True, exist_ok=True)
    (out / "analysis.json").write_text(json.dumps(doc, indent=1) + "\n")
    if plots and runs:
        _plots(out, tab, doc["pareto"])
    return doc


def _run_time(runs: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> dict[str, Any]:
    """The records' ``seconds``: trained runs (median, range) and all records (hours)."""
    every = [r["seconds"] for by_seed in runs.values() for r in by_seed.values()]
    trained = sorted(
        r["seconds"] for arm, by_seed in runs.items() if arm != "start" for r in by_seed.values()
    )
    if not trained:
        return {"records": len(every), "hours": round(sum(every) / 3600, 2)}
    mid = len(trained) // 2
    median = trained[mid] if len(trained) % 2 else (trained[mid - 1] + trained[mid]) / 2
    return {
        "records": len(every), "hours": round(sum(every) / 3600, 2), "trained": len(trained),
        "median_s": round(median, 1), "min_s": trained[0], "max_s": trained[-1],
    }  # fmt: skip


def _fmt(p: Mapping[str, Any] | None) -> str:
    if p is None:
        return "–"
    return f"{p['mean']:+.1f} [{p['t95'][0]:+.1f}, {p['t95'][1]:+.1f}]"


_PLUG_IN = (
    "> EC@16 here is EC over all n held-out draws, as these records hold it (made before "
    "issue 33, they keep no per-family counts, so it is not recomputed): the unbiased EC@16 "
    "when n = 16, an overstatement of it when n > 16 (n = 32 at the full protocol)."
)


def markdown(doc: Mapping[str, Any]) -> str:
    """The analysis as Markdown tables (what the experiment report quotes)."""
    cols = ("Arm", "seeds", "pass@1", "EC@16", "reach@16", "feasible H", "feasible mass",
            "ΔEC@16 vs GRPO", "Δpass@1 vs GRPO")  # fmt: skip
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    if doc.get("ec_estimator") == "plug-in over n draws":
        lines = [_PLUG_IN, "", *lines]
    for r in doc["arms"]:
        lines.append(
            f"| {r['arm']} | {len(r['seeds'])} | {r['pass@1']:.3f} | {r['EC@16']:.3f} | "
            f"{r['reach@16']:.3f} | {r['feasible_entropy']:.3f} | {r['feasible_mass']:.3f} | "
            f"{_fmt(r.get('ΔEC@16 vs grpo'))} | {_fmt(r.get('Δpass@1 vs grpo'))} |"
        )
    v = doc["verdicts"]
    lines += ["", "| Paired difference (points) | n | mean [t95] | bootstrap 95% |"]
    lines.append("|---|---|---|---|")
    for p in [*v["pairs"], *doc.get("more_pairs", [])]:
        boot = f"[{p['boot95'][0]:+.1f}, {p['boot95'][1]:+.1f}]"
        lines.append(f"| {p['a']} − {p['b']}, {p['metric']} | {p['n']} | {_fmt(p)} | {boot} |")
    lines += ["", "| Criterion | met |", "|---|---|"]
    lines += [
        f"| {k} | {'n/a' if x is None else ('yes' if x else 'no')} |"
        for k, x in v["criteria"].items()
    ]
    lines += ["", f"Recovery of GRPO's EC@16 drop by stratified-v2: {v['recovery']}; "
              f"upper t95 bound of stratified-v2 − unscored (EC@16): {v['refute_bound']}; "
              f"**overall: {v['overall']}**."]  # fmt: skip
    t = doc.get("run_time", {})
    if t.get("trained"):
        lines += ["", f"Run time (the records' `seconds`): {t['trained']} trained runs, median "
                  f"{t['median_s']} s ({t['min_s']}–{t['max_s']} s); all {t['records']} records "
                  f"{t['hours']} h."]  # fmt: skip
    lines += _intervention_lines(doc)
    lines += matched.markdown(doc["matched"])
    lines += frontier_markdown(doc.get("frontier"))
    return "\n".join(lines) + "\n"


def _summary_lines(doc: Mapping[str, Any]) -> list[str]:
    """The intervention pooled over seeds: end vs start on the same pairs."""
    rows = doc.get("intervention_summary", {})
    if not rows:
        return []
    cols = ("Arm", "seeds", "pairs", "mean π_f end / start", "free end / start (hits)",
            "forced end / start (samples)", "Δforced, points")  # fmt: skip
    lines = ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for arm, r in rows.items():
        e, s = r["end"], r["start"]
        free = " / ".join("–" if x["free"] is None else str(x["free"]) for x in (e, s))
        forced = " / ".join("–" if x["forced"] is None else str(x["forced"]) for x in (e, s))
        lines.append(
            f"| {arm} | {r['seeds']} | {e['pairs']} | {e['mean_pi']} / {s['mean_pi']} | "
            f"{free} ({e['free_hits']} / {s['free_hits']}) | "
            f"{forced} ({e['forced_samples']}) | {_fmt(r.get('Δforced'))} |"
        )
    return lines


def _intervention_lines(doc: Mapping[str, Any]) -> list[str]:
    """The pooled summary, then one row per (arm, seed) and policy: the end policy's and,
    where run, the start's."""
    icols = ("Arm", "policy", "pairs", "mean π_f", "free completion (hits / samples)",
             "free, exact π_f", "forced (samples)")  # fmt: skip
    lines = _summary_lines(doc)
    lines += ["", "| " + " | ".join(icols) + " |", "|" + "---|" * len(icols)]
    for key, policy in (("interventions", "end"), ("interventions_start", "start")):
        for arm, ivs in sorted(doc.get(key, {}).items()):
            for iv in ivs:
                hits = f"{iv['free_hits']} / " if "free_hits" in iv else ""
                free = f"{iv['free']} ({hits}{iv['free_samples']})"
                forced = f"{iv['forced']} ({iv['forced_samples']})"
                lines.append(
                    f"| {arm} | {policy} | {iv['pairs']} | {iv['mean_pi']} | {free} | "
                    f"{iv.get('free_exact_pi', '–')} | {forced} |"
                )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m forkgate.jobs.experiment.analysis RESULTS... --out DIR``."""
    p = argparse.ArgumentParser(prog="forkgate.jobs.experiment.analysis")
    p.add_argument("results", type=Path, nargs="+")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument(
        "--budget-arm", default=UNSCORED, help="arm whose end feasible entropy is the budget"
    )
    p.add_argument("--budget", type=float, default=None, help="a fixed entropy budget (nats)")
    p.add_argument(
        "--pair", nargs=2, action="append", default=[], metavar=("A", "B"),
        help="also report the paired difference A − B (repeatable)",
    )  # fmt: skip
    args = p.parse_args(argv)
    out = args.out or args.results[0].parent
    doc = write_analysis(
        args.results, out, budget_arm=args.budget_arm, budget=args.budget,
        pairs=[tuple(x) for x in args.pair],
    )  # fmt: skip
    (out / "analysis.md").write_text(markdown(doc), encoding="utf-8")
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
