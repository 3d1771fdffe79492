"""The κ calibration's plot and Markdown tables (``forkgate kappa-calibrate``).

Example::

    plot(report, Path("out/kappa/kappa-calibration.png"))
    text = markdown(report)

``report`` is what ``forkgate.jobs.kappa_calibrate.calibrate`` returns. matplotlib renders
off-screen (Agg) through ``plotting``, the jobs' one plotting stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["markdown", "plot"]


def _at(report: Mapping[str, Any], threshold: float) -> Mapping[str, Any]:
    """The sweep row of ``threshold``."""
    rows = report["countdown"]["sweep"]
    return next(r for r in rows if abs(float(r["threshold"]) - threshold) < 1e-9)


def _norm(d: Mapping[str, Any]) -> float:
    """(W/B)/n̄ of a determinacy report (NaN when infinite)."""
    x = d["ratio_over_baseline"]
    return float("nan") if x is None else float(x)


def _agreement_panel(ax: Any, report: Mapping[str, Any]) -> None:
    sweep = report["countdown"]["sweep"]
    ts = [float(r["threshold"]) for r in sweep]
    ax.plot(ts, [r["agreement"]["ari_mean"] for r in sweep], "o-", label="mean ARI vs gold")
    ax.plot(ts, [r["agreement"]["purity_mean"] for r in sweep], "s--", label="mean purity")
    ax.axvline(float(report["options"]["threshold"]), color="grey", lw=0.8)
    ax.set_xlabel("distance threshold")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("Countdown: learned κ vs countdown.first-op.v1")
    twin = ax.twinx()
    twin.plot(ts, [r["agreement"]["classes_mean"] for r in sweep], "^:", color="C2")
    twin.axhline(sweep[0]["agreement"]["gold_classes_mean"], color="C2", lw=0.8, ls="-.")
    twin.set_ylabel("classes per question (green; dash-dot: gold)")
    ax.legend(loc="lower left", fontsize=8)


def _proxy_panel(ax: Any, report: Mapping[str, Any]) -> None:
    cd = report["countdown"]
    sweep = cd["sweep"]
    ts = [float(r["threshold"]) for r in sweep]
    ax.plot(ts, [_norm(r["determinacy"]) for r in sweep], "o-", label="learned")
    ax.axhline(_norm(cd["gold_initiated"]), color="k", ls="--", label="gold countdown.first-op.v1")
    ax.axhline(_norm(cd["first_operation"]), color="C3", ls=":", label="first operation a∘b")
    ax.axhline(1.0, color="grey", lw=0.8, ls="-.", label="random labels (≈1)")
    ax.axvline(float(report["options"]["threshold"]), color="grey", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("distance threshold")
    ax.set_title("Countdown: proxy (W/B)/n̄, lower = more decisive")
    ax.legend(fontsize=8)


def _math_panel(ax: Any, report: Mapping[str, Any]) -> None:
    math = report["math"]["kappas"]
    names = list(math)
    ys = list(range(len(names)))
    aris = [math[n]["agreement_with_route"]["ari_mean"] for n in names]
    ax.barh([y - 0.2 for y in ys], aris, height=0.4, label="mean ARI vs known route")
    norms = [_norm(math[n]["determinacy"]) for n in names]
    ax.barh([y + 0.2 for y in ys], norms, height=0.4, label="(W/B)/n̄")
    ax.set_yticks(ys)
    ax.set_yticklabels(names, fontsize=7)
    ax.invert_yaxis()
    ax.set_title("Math corpus: ARI vs route; (W/B)/n̄")
    ax.legend(fontsize=8)


def plot(report: Mapping[str, Any], path: Path) -> None:
    """Four panels: ARI and classes against the threshold, the proxy (W/B)/n̄ of gold and
    learned, the ARI histogram at the chosen threshold, and the math κs against the route."""
    from .plotting import pyplot

    plt = pyplot()

    chosen = float(report["options"]["threshold"])
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    _agreement_panel(axes[0][0], report)
    _proxy_panel(axes[0][1], report)
    ax = axes[1][0]
    ax.hist(_at(report, chosen)["agreement"]["ari_per_question"], bins=20, range=(-0.5, 1.0))
    ax.set_xlabel(f"ARI per question (threshold {chosen:g})")
    ax.set_ylabel("questions")
    ax.set_title("Countdown: per-question agreement with gold")
    _math_panel(axes[1][1], report)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt(x: Any) -> str:
    if x is None:
        return "∞"
    if isinstance(x, float):
        return f"{x:.3f}"
    return str(x)


def _det_row(name: str, d: Mapping[str, Any], agree: Mapping[str, Any] | None) -> str:
    cells = [
        name,
        _fmt(d["ratio"]),
        _fmt(d["random_label_baseline"]),
        _fmt(d["ratio_over_baseline"]),
        d["verdict"],
        _fmt(d["families"]),
    ]
    if agree is not None:
        cells += [_fmt(agree["ari_mean"]), _fmt(agree["purity_mean"]), _fmt(agree["classes_mean"])]
    else:
        cells += ["—", "—", "—"]
    return "| " + " | ".join(cells) + " |"


_HEAD = (
    "| κ | W/B | random-label n̄ | (W/B)/n̄ | verdict | families | ARI | purity | "
    "classes/question |\n|---|---|---|---|---|---|---|---|---|"
)


def _countdown_md(report: Mapping[str, Any]) -> list[str]:
    cd = report["countdown"]
    chosen = float(report["options"]["threshold"])
    lines = [
        f"Countdown: {cd['questions']} questions, {cd['rollouts']} rollouts "
        f"({cd['rollouts_with_step']} with a `<think>` step), pass@1 {cd['pass_at_1']:.3f}.",
        "",
        _HEAD,
        _det_row("countdown.first-op.v1, initiated (gold)", cd["gold_initiated"], None),
        _det_row("countdown.first-op.v1, answer", cd["gold_answer"], None),
        _det_row(
            "first operation a∘b of the step", cd["first_operation"], cd["first_operation_vs_gold"]
        ),
    ]
    for r in cd["sweep"]:
        mark = " **(default)**" if abs(float(r["threshold"]) - chosen) < 1e-9 else ""
        name = f"learned, threshold {r['threshold']:g}{mark}"
        lines.append(_det_row(name, r["determinacy"], r["agreement"]))
    lines += [
        "",
        f"Gold classes per question: {cd['sweep'][0]['agreement']['gold_classes_mean']:.3f}. "
        "The ARI, purity and classes of a learned row are against the gold; against the first "
        "operation a∘b of the step they are:",
        "",
        "| threshold | ARI vs a∘b | purity vs a∘b | a∘b classes/question |",
        "|---|---|---|---|",
    ]
    for r in cd["sweep"]:
        f = r["agreement_first_operation"]
        lines.append(
            f"| {r['threshold']:g} | {_fmt(f['ari_mean'])} | {_fmt(f['purity_mean'])} | "
            f"{_fmt(f['gold_classes_mean'])} |"
        )
    lines.append("")
    dev = _at(report, chosen)["deviation"]
    for key in ("ratio", "ratio_over_baseline"):
        d = dev[key]
        if d is None:
            lines.append(f"- proxy deviation ({key}): undefined (an infinite ratio)")
            continue
        lines.append(
            f"- proxy deviation ({key}) at threshold {chosen:g}: learned {d['learned']:.3f} "
            f"vs gold {d['gold']:.3f}: difference {d['difference']:+.3f}, relative "
            f"{_fmt(d['relative'])}"
        )
    lines.append(f"- same verdict as gold: {dev['same_verdict']}")
    return lines


def _math_md(report: Mapping[str, Any]) -> list[str]:
    m = report["math"]
    lines = [
        f"Math corpus: {m['problems']} problems, {m['rollouts']} solutions, "
        f"pass@1 {m['pass_at_1']:.3f}.",
        "",
        _HEAD.replace("| ARI | purity |", "| ARI vs route | purity vs route |"),
    ]
    for name, k in m["kappas"].items():
        lines.append(_det_row(name, k["determinacy"], k["agreement_with_route"]))
    gold = m["kappas"]["known route (gold)"]["determinacy"]["ratio_over_baseline"]
    lines.append("")
    for name, k in m["kappas"].items():
        x = k["determinacy"]["ratio_over_baseline"]
        if name != "known route (gold)" and x is not None and gold:
            lines.append(
                f"- {name}: (W/B)/n̄ {x:.3f} vs the known route's {gold:.3f} "
                f"(relative {(x - gold) / gold:+.3f})"
            )
    return lines


def markdown(report: Mapping[str, Any]) -> str:
    """The figures as Markdown tables (what docs/kappa-calibration.md quotes)."""
    return "\n".join([*_countdown_md(report), "", *_math_md(report)]) + "\n"
