"""The run report: a static HTML page with PNG plots and the JSON behind every plot.

Example::

    path = write_report(Path("out/run/report"), run_data)      # out/run/report/index.html

``run_data`` is what ``forkgate run`` measures (``summary``, ``tasks``, ``pass_at_k``, and
optionally ``support``: the support rows of ``forkgate.support`` as
``forkgate.jobs.support_report.write_support_report`` writes them to ``support.json``). Each
plot ``NAME.png`` has ``NAME.json`` next to it with exactly the numbers drawn (``plotting``:
matplotlib, off-screen, the ``train`` extra).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .plotting import pyplot, save
from .support_report import SUPPORT_PLOTS, save_support_plots

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
    if data.get("support"):
        names += [n for n, _ in SUPPORT_PLOTS]
    return names


def _task_plots(out: Path, tasks: Sequence[Mapping[str, Any]], k: int) -> None:
    _ec_plots(out, tasks, k)
    _families_plots(out, tasks)
    _entry_plots(out, tasks)


def _ec_plots(out: Path, tasks: Sequence[Mapping[str, Any]], k: int) -> None:
    """EC@K per task and its distribution."""
    plt = pyplot()
    ec = [t["ec_at_k"] for t in tasks]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(range(len(ec)), ec, color="#3b7dd8")
    ax.set(xlabel="task", ylabel=f"EC@{k}", ylim=(0, 1.05), title=f"EC@{k} per task")
    save(out, "ec_at_k_per_task", fig, {"k": k, "ec_at_k": ec, "tasks": [t["task"] for t in tasks]})

    fig, ax = plt.subplots(figsize=(5, 3.2))
    bins = [i / 10 for i in range(11)]
    counts, _, _ = ax.hist(ec, bins=bins, color="#3b7dd8", edgecolor="white")
    ax.set(xlabel=f"EC@{k}", ylabel="tasks", title=f"EC@{k} distribution")
    save(out, "ec_at_k_distribution", fig, {"bins": bins, "counts": [int(c) for c in counts]})


def _families_plots(out: Path, tasks: Sequence[Mapping[str, Any]]) -> None:
    """Certified against feasible families; per-family completion against reach."""
    plt = pyplot()
    feas = [t["feasible"] for t in tasks]
    cert = [t["certified"] for t in tasks]
    fig, ax = plt.subplots(figsize=(5, 4))
    top = max([*feas, *cert, 1])
    ax.plot([0, top], [0, top], color="#999", lw=1, label="all certified")
    ax.scatter(feas, cert, alpha=0.6, color="#d8603b")
    ax.set(xlabel="feasible families", ylabel="certified families", title="Certified vs feasible")
    ax.legend(loc="upper left")
    save(out, "certified_vs_feasible", fig, {"feasible": feas, "certified": cert})

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
    save(out, "family_completion", fig, {"reach": reach, "completion": rate, "family": labels})


def _entry_plots(out: Path, tasks: Sequence[Mapping[str, Any]]) -> None:
    """The entry-family histogram (pooled by rank within each task) and entry entropy."""
    plt = pyplot()
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
    save(out, "entry_family_histogram", fig, {"rank_share": shares, "rank_count": pooled})

    ent = [t["entry_entropy"] for t in tasks]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.hist(ent, bins=12, color="#8a5ad8", edgecolor="white")
    ax.axvline(sum(ent) / max(1, len(ent)), color="black", lw=1, ls="--", label="mean")
    ax.set(xlabel="entry entropy (nats)", ylabel="tasks", title="Entry entropy per task")
    ax.legend()
    save(out, "entry_entropy", fig, {"entry_entropy": ent})


def _pass_plot(out: Path, curve: Mapping[str, float]) -> None:
    plt = pyplot()

    ks = [int(k) for k in curve]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(ks, list(curve.values()), marker="o", color="#3b7dd8")
    ax.set(xscale="log", xlabel="k", ylabel="pass@k", ylim=(0, 1.02), title="pass@k")
    ax.set_xticks(ks, [str(k) for k in ks])
    save(out, "pass_at_k", fig, {"k": ks, "pass_at_k": list(curve.values())})


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
            (``{k: value}``) and optionally ``support`` (what ``support.json`` holds).

    Raises:
        SetupError: matplotlib is not installed.

    Returns:
        The path of ``index.html``.
    """
    out.mkdir(parents=True, exist_ok=True)
    _task_plots(out, data["tasks"], int(data["k"]))
    _pass_plot(out, data["pass_at_k"])
    titles = dict(_PLOTS)
    if data.get("support"):
        save_support_plots(out, data["support"]["rows"])
        titles |= dict(SUPPORT_PLOTS)
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
