"""Support tables and plots: what ``forkgate guard`` prints and writes, the run report's support.

Example:
    >>> from forkgate.support import SupportTracker
    >>> t = SupportTracker(k=1, resamples=100)
    >>> _ = t.observe("c0", "a", [[True], [False]], routes=["+", "*"])
    >>> _ = t.observe("c1", "a", [[True], [True]], routes=["+", "+"])
    >>> fig, drawn = best_at_k_figure([r.to_json() for r in t.rows])
    >>> drawn["a"]
    {'best_at_k': [0.5, 1.0], 'pass_at_1': [0.5, 1.0]}
    >>> routes_figure([r.to_json() for r in t.rows])[1]["a"]["c1"]
    {'+': 1.0}

The tables and JSON are pure; the plots draw with the jobs' one stack (``plotting``:
matplotlib, off-screen) and ``write_support_report`` is the one function that writes files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from certd.atomicfile import write_atomic
from certd.effective_support import Interval, SupportChange, SupportFigures
from certd.v1 import authority_pb2

from ..support import SupportRow
from .plotting import pyplot, save

__all__ = [
    "SUPPORT_PLOTS",
    "best_at_k_figure",
    "decisions_json",
    "decisions_table",
    "routes_figure",
    "rows_from_decisions",
    "save_support_plots",
    "write_support_report",
]

SUPPORT_PLOTS = (
    ("support_best_at_k", "Support: best@k (solid) and pass@1 (dashed) per task and checkpoint"),
    ("support_routes", "Support: route shares per task and checkpoint"),
)
"""The support plots' file stems and titles (``write_support_report``, the run report)."""


def best_at_k_figure(rows: Sequence[Mapping[str, Any]]) -> tuple[Any, dict[str, Any]]:
    """best@k (solid) and pass@1 (dashed) per task over checkpoints: (figure, numbers drawn).

    Args:
        rows: support rows as JSON (``SupportRow.to_json``).
    """
    plt = pyplot()
    ckpts = list(dict.fromkeys(r["checkpoint"] for r in rows))
    fig, ax = plt.subplots(figsize=(7, 3.4))
    payload: dict[str, Any] = {"checkpoints": ckpts}
    for task in dict.fromkeys(r["task"] for r in rows):
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
    return fig, payload


def routes_figure(rows: Sequence[Mapping[str, Any]]) -> tuple[Any, dict[str, Any]]:
    """Route shares per task and checkpoint, stacked bars (a panel per task): (figure, numbers).

    Args:
        rows: support rows as JSON (``SupportRow.to_json``).
    """
    plt = pyplot()
    ckpts = list(dict.fromkeys(r["checkpoint"] for r in rows))
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    routes = sorted({k for r in rows for k in r["figures"]["routes"]})
    height = 1.8 * max(1, len(tasks)) + 0.6
    fig, axes = plt.subplots(max(1, len(tasks)), 1, figsize=(7, height), squeeze=False)
    shares: dict[str, Any] = {"checkpoints": ckpts, "routes": routes}
    for ax, task in zip(axes[:, 0], tasks, strict=False):
        by_ckpt = {r["checkpoint"]: r["figures"]["routes"] for r in rows if r["task"] == task}
        bottom = [0.0] * len(ckpts)
        for route in routes:
            vals = [by_ckpt.get(c, {}).get(route, 0.0) for c in ckpts]
            ax.bar(range(len(ckpts)), vals, bottom=bottom, label=route)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_xticks(range(len(ckpts)), ckpts, fontsize=7)
        ax.set(ylim=(0, 1), ylabel=task)
        shares[task] = {c: by_ckpt.get(c, {}) for c in ckpts}
    if routes:
        axes[0, 0].legend(fontsize=7, ncol=len(routes), loc="upper right")
    axes[0, 0].set_title("Route shares")
    return fig, shares


def save_support_plots(out: Path, rows: Sequence[Mapping[str, Any]]) -> list[Path]:
    """Both support plots (``SUPPORT_PLOTS``) as PNG with their JSON into ``out``."""
    figures = (best_at_k_figure(rows), routes_figure(rows))
    return [save(out, name, *fig) for (name, _), fig in zip(SUPPORT_PLOTS, figures, strict=True)]


def decisions_table(decisions: Sequence[authority_pb2.AcceptanceDecision]) -> str:
    """certd's acceptance decisions as the support table ``forkgate guard`` prints."""
    head = (
        f"{'checkpoint':<10} {'decision':<8} {'task':<8} {'best@k':>6} {'pass@1':>6} "
        f"{'all✓':>5} {'mixed':>5} {'all✗':>5} {'SER [CI]':>24} {'noise':>5}  top routes"
    )
    lines = [head, "-" * len(head)]
    for d in decisions:
        for i, f in enumerate(d.figures):
            ser = (
                f"{f.ser.estimate:+.3f} [{f.ser.low:+.3f},{f.ser.high:+.3f}]"
                if f.has_previous
                else "-"
            )
            noise = ("yes" if f.within_noise else "NO") if f.has_previous else "-"
            top = sorted(f.routes.items(), key=lambda kv: -kv[1])[:3]
            what = ("ACCEPT" if d.accepted else "REFUSE") if i == 0 else ""
            lines.append(
                f"{(d.checkpoint if i == 0 else ''):<10} {what:<8} {f.task_set:<8} "
                f"{f.best_at_k:>6.3f} {f.pass_at_1:>6.3f} {f.all_correct:>5.2f} {f.mixed:>5.2f} "
                f"{f.all_wrong:>5.2f} {ser:>24} {noise:>5}  "
                + " ".join(f"{k}:{v:.2f}" for k, v in top)
            )
        if not d.accepted:
            lines.append(f"{'':<10} refused: {d.refusal.reason}: {d.refusal.detail}")
    return "\n".join(lines)


def decisions_json(decisions: Sequence[authority_pb2.AcceptanceDecision]) -> list[dict[str, Any]]:
    """The decisions as JSON objects (protobuf JSON, without the envelope bytes)."""
    out = []
    for d in decisions:
        obj = json_format.MessageToDict(
            d, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        obj.get("certificate", {}).pop("envelope", None)
        obj.get("certificate", {}).pop("inclusion", None)
        out.append(obj)
    return out


def _interval(pb: authority_pb2.Interval) -> Interval:
    return Interval(pb.estimate, pb.low, pb.high, pb.level)


def rows_from_decisions(
    decisions: Sequence[authority_pb2.AcceptanceDecision], tasks: Sequence[str] = ()
) -> list[SupportRow]:
    """Support rows from certd's decisions (accepted and refused), optionally some task sets."""
    rows = []
    for d in decisions:
        for f in d.figures:
            if tasks and f.task_set not in tasks:
                continue
            change = None
            if f.has_previous:
                change = SupportChange(
                    best_at_k=_interval(f.best_at_k_change),
                    pass_at_1=_interval(f.pass_at_1_change),
                    ser=_interval(f.ser),
                    paired=True,
                )
            figures = SupportFigures(
                k=f.k,
                prompts=f.prompts,
                best_at_k=f.best_at_k,
                pass_at_1=f.pass_at_1,
                all_correct=f.all_correct,
                mixed=f.mixed,
                all_wrong=f.all_wrong,
                routes=dict(sorted(f.routes.items())),
                families=dict(sorted(f.families.items())),
            )
            rows.append(SupportRow(d.checkpoint, f.task_set, figures, (), change))
    return rows


def write_support_report(
    workdir: Path,
    rows: Sequence[SupportRow],
    decisions: Sequence[authority_pb2.AcceptanceDecision] = (),
) -> list[Path]:
    """Write ``support.json`` and the support plots (PNG and JSON each) into ``workdir``.

    Raises:
        OSError: the files cannot be written.
        SetupError: matplotlib is not installed.

    Returns:
        The paths of ``support.json`` and the PNGs.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    data = {"rows": [r.to_json() for r in rows], "decisions": decisions_json(decisions)}
    path = workdir / "support.json"
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    write_atomic(path, text.encode("utf-8"), mode=0o644)
    return [path, *save_support_plots(workdir, data["rows"])]
