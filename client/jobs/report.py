"""The run report: a static HTML page with PNG plots and the JSON behind every plot.

Example::

    path = write_report(Path("out/run/report"), run_data)      # out/run/report/index.html

``run_data`` is what ``forkgate run`` measures (``summary``, ``tasks``, ``pass_at_k``, and
optionally ``experiment`` and ``support``: the support rows of ``forkgate.support`` as
``forkgate.jobs.support_report.write_support_report`` writes them to ``support.json``). Each plot
``NAME.png`` has ``NAME.json`` next to it with exactly the numbers drawn. matplotlib (the
``train`` extra) renders off-screen (Agg backend).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_names", "write_report"]

_PLOTS = (
    ("ec_at_k_per_task", "EC@K per task"),
    ("ec_at_k_distribution", "EC@K distribution"),
    ("certified_vs_feasible", "Certified against feasible families"),
    ("entry_family_histogram", "Entry-family histogram (pooled by rank within each task)"),
    ("entry_entropy", "Entry entropy per task"),
    ("pass_at_k", "pass@k"),
    ("family_completion", "Per-family completion rate against reach"),
)


def plot_names(data: Mapping[str, Any]) -> list[str]:
    """The plot file stems a report of ``data`` contains."""
    names = [n for n, _ in _PLOTS]
    if data.get("experiment"):
        names += [f"experiment_{m}" for m in _EXPERIMENT_METRICS] + ["experiment_intervention"]
    if data.get("support"):
        names += [n for n, _ in _SUPPORT_PLOTS]
    return names


_SUPPORT_PLOTS = (
    ("support_best_at_k", "Support: best@k (solid) and pass@1 (dashed) per task and checkpoint"),
    ("support_routes", "Support: route shares per task and checkpoint"),
)


def _support_plots(out: Path, support: Mapping[str, Any]) -> None:
    """best@k/pass@1 lines and route-share bars from ``support["rows"]`` (SupportRow JSON)."""
    import matplotlib.pyplot as plt

    rows: Sequence[Mapping[str, Any]] = support["rows"]
    ckpts = list(dict.fromkeys(r["checkpoint"] for r in rows))
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, ax = plt.subplots(figsize=(7, 3.4))
    payload: dict[str, Any] = {"checkpoints": ckpts}
    for task in tasks:
        mine = [r for r in rows if r["task"] == task]
        xs = [ckpts.index(r["checkpoint"]) for r in mine]
        best = [r["figures"]["best_at_k"] for r in mine]
        p1 = [r["figures"]["pass_at_1"] for r in mine]
        (line,) = ax.plot(xs, best, marker="o", label=f"{task} best@k")
        ax.plot(xs, p1, marker=".", linestyle="--", color=line.get_color(), label=f"{task} pass@1")
        payload[task] = {"best_at_k": best, "pass_at_1": p1}
    ax.set_xticks(range(len(ckpts)), ckpts, fontsize=7, rotation=30)
    ax.set(ylim=(0, 1.02), ylabel="share of prompts / samples", title="Support per checkpoint")
    ax.legend(fontsize=7)
    _save(out, "support_best_at_k", fig, payload)

    routes = sorted({k for r in rows for k in r["figures"]["routes"]})
    fig, axes = plt.subplots(len(tasks), 1, figsize=(7, 1.8 * len(tasks) + 0.6), squeeze=False)
    shares: dict[str, Any] = {"checkpoints": ckpts, "routes": routes}
    for ax, task in zip(axes[:, 0], tasks, strict=True):
        by_ckpt = {r["checkpoint"]: r["figures"]["routes"] for r in rows if r["task"] == task}
        bottom = [0.0] * len(ckpts)
        for route in routes:
            vals = [by_ckpt.get(c, {}).get(route, 0.0) for c in ckpts]
            ax.bar(range(len(ckpts)), vals, bottom=bottom, label=route)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_xticks(range(len(ckpts)), ckpts, fontsize=7)
        ax.set(ylim=(0, 1), ylabel=task)
        shares[task] = {c: by_ckpt.get(c, {}) for c in ckpts}
    axes[0, 0].legend(fontsize=7, ncol=len(routes), loc="upper right")
    axes[0, 0].set_title("Route shares")
    _save(out, "support_routes", fig, shares)


_EXPERIMENT_METRICS = ("pass@1", "pass@16", "EC@16", "entry_entropy", "first_token_entropy")


def _save(out: Path, name: str, fig: Any, payload: Any) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=96)
    plt.close(fig)
    (out / f"{name}.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


def _task_plots(out: Path, tasks: Sequence[Mapping[str, Any]], k: int) -> None:
    import matplotlib.pyplot as plt

    ec = [t["ec_at_k"] for t in tasks]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(range(len(ec)), ec, color="#3b7dd8")
    ax.set(xlabel="task", ylabel=f"EC@{k}", ylim=(0, 1.05), title=f"EC@{k} per task")
    _save(
        out, "ec_at_k_per_task", fig, {"k": k, "ec_at_k": ec, "tasks": [t["task"] for t in tasks]}
    )

    fig, ax = plt.subplots(figsize=(5, 3.2))
    bins = [i / 10 for i in range(11)]
    counts, _, _ = ax.hist(ec, bins=bins, color="#3b7dd8", edgecolor="white")
    ax.set(xlabel=f"EC@{k}", ylabel="tasks", title=f"EC@{k} distribution")
    _save(out, "ec_at_k_distribution", fig, {"bins": bins, "counts": [int(c) for c in counts]})

    feas = [t["feasible"] for t in tasks]
    cert = [t["certified"] for t in tasks]
    fig, ax = plt.subplots(figsize=(5, 4))
    top = max([*feas, *cert, 1])
    ax.plot([0, top], [0, top], color="#999", lw=1, label="all certified")
    ax.scatter(feas, cert, alpha=0.6, color="#d8603b")
    ax.set(xlabel="feasible families", ylabel="certified families", title="Certified vs feasible")
    ax.legend(loc="upper left")
    _save(out, "certified_vs_feasible", fig, {"feasible": feas, "certified": cert})

    width = max([len(t["entry_counts"]) for t in tasks] + [1])
    pooled = [0] * width
    for t in tasks:
        for rank, c in enumerate(sorted(t["entry_counts"].values(), reverse=True)):
            pooled[rank] += c
    total = max(1, sum(pooled))
    shares = [c / total for c in pooled]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar([str(r + 1) for r in range(width)], shares, color="#5aa469")
    ax.set(xlabel="entry family rank within its task", ylabel="share of samples")
    ax.set_title("Entry-family histogram")
    _save(out, "entry_family_histogram", fig, {"rank_share": shares, "rank_count": pooled})

    ent = [t["entry_entropy"] for t in tasks]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.hist(ent, bins=12, color="#8a5ad8", edgecolor="white")
    ax.axvline(sum(ent) / max(1, len(ent)), color="black", lw=1, ls="--", label="mean")
    ax.set(xlabel="entry entropy (nats)", ylabel="tasks", title="Entry entropy per task")
    ax.legend()
    _save(out, "entry_entropy", fig, {"entry_entropy": ent})

    reach, rate, labels = [], [], []
    for t in tasks:
        n = max(1, sum(t["entry_counts"].values()))
        for label, fam in t["family_completion"].items():
            reach.append(fam["total"] / n)
            rate.append(fam["correct"] / fam["total"])
            labels.append([t["task"], label])
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.scatter(reach, rate, alpha=0.5, color="#d83b8a")
    ax.set(
        xlabel="reach (share of a task's samples that enter the family)",
        ylabel="completion rate",
        xlim=(0, 1.02),
        ylim=(-0.02, 1.02),
        title="Per-family completion",
    )
    _save(out, "family_completion", fig, {"reach": reach, "completion": rate, "family": labels})


def _pass_plot(out: Path, curve: Mapping[str, float]) -> None:
    import matplotlib.pyplot as plt

    ks = [int(k) for k in curve]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(ks, list(curve.values()), marker="o", color="#3b7dd8")
    ax.set(xscale="log", xlabel="k", ylabel="pass@k", ylim=(0, 1.02), title="pass@k")
    ax.set_xticks(ks, [str(k) for k in ks])
    _save(out, "pass_at_k", fig, {"k": ks, "pass_at_k": list(curve.values())})


def _experiment_plots(out: Path, exp: Mapping[str, Any]) -> None:
    import matplotlib.pyplot as plt

    arms: Mapping[str, Sequence[Mapping[str, float]]] = exp["arms"]
    for metric in _EXPERIMENT_METRICS:
        fig, ax = plt.subplots(figsize=(6, 3.4))
        payload = {}
        for arm, rows in arms.items():
            steps = [r["step"] for r in rows]
            vals = [r[metric] for r in rows]
            ax.plot(steps, vals, marker=".", label=arm)
            payload[arm] = {"step": steps, metric: vals}
        ax.set(xlabel="GRPO step", ylabel=metric, title=f"{metric} per step")
        ax.legend(fontsize=8)
        _save(out, f"experiment_{metric}", fig, payload)
    inter = exp["intervention"]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    names = list(inter)
    free = [inter[a]["free"] for a in names]
    forced = [inter[a]["forced"] for a in names]
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], free, width=0.4, label="free (samples entering the family)")
    ax.bar([x + 0.2 for x in xs], forced, width=0.4, label="forced entry prefix")
    ax.set_xticks(list(xs), names, fontsize=8)
    ax.set(ylabel="completion rate", ylim=(0, 1.02), title="Low-reach families: completion")
    ax.legend(fontsize=8)
    _save(out, "experiment_intervention", fig, dict(inter))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if math.isfinite(v) else str(v)
    if isinstance(v, dict):
        return ", ".join(f"{k} {_fmt(x)}" for k, x in v.items())
    return str(v)


def write_report(out: Path, data: Mapping[str, Any]) -> Path:
    """Render the plots, their JSON and ``index.html`` into ``out``; return the page's path.

    Args:
        out: the report folder (created).
        data: ``summary`` (flat figures), ``tasks`` (per-task rows), ``k``, ``pass_at_k``
            (``{k: value}``) and optionally ``experiment`` (``arms``, ``intervention``).

    Returns:
        The path of ``index.html``.
    """
    import matplotlib

    matplotlib.use("Agg")
    out.mkdir(parents=True, exist_ok=True)
    _task_plots(out, data["tasks"], int(data["k"]))
    _pass_plot(out, data["pass_at_k"])
    titles = dict(_PLOTS)
    if data.get("experiment"):
        _experiment_plots(out, data["experiment"])
        titles |= {f"experiment_{m}": f"Experiment: {m} per GRPO step" for m in _EXPERIMENT_METRICS}
        titles["experiment_intervention"] = "Experiment: entry-prefix intervention"
    if data.get("support"):
        _support_plots(out, data["support"])
        titles |= dict(_SUPPORT_PLOTS)
    (out / "run.json").write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    rows = "\n".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>"
        for k, v in data["summary"].items()
    )
    figures = "\n".join(
        f'<figure id="{n}"><img src="{n}.png" alt="{html.escape(titles[n])}">'
        f'<figcaption>{html.escape(titles[n])} — <a href="{n}.json">data</a></figcaption></figure>'
        for n in plot_names(data)
    )
    notes = "".join(f"<p>{html.escape(x)}</p>" for x in data.get("notes", []))
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ForkGate run report</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 70em; }}
table {{ border-collapse: collapse; }} th, td {{ text-align: left; padding: 2px 12px; }}
th {{ color: #444; font-weight: normal; }} figure {{ display: inline-block; margin: 1em; }}
img {{ max-width: 100%; border: 1px solid #ddd; }}
</style></head>
<body>
<h1>ForkGate run report</h1>
<table id="summary">{rows}</table>
{notes}
<p>Every plot's numbers are in the JSON file next to it;
<a href="run.json">run.json</a> has all.</p>
{figures}
</body></html>
"""
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index
