"""Support tables and plots: what ``forkgate guard`` prints and the report's support section.

Example:
    >>> from forkgate.support import SupportTracker
    >>> t = SupportTracker(k=1, resamples=100)
    >>> _ = t.observe("c0", "a", [[True], [False]], routes=["+", "*"])
    >>> _ = t.observe("c1", "a", [[True], [True]], routes=["+", "+"])
    >>> svg = support_svg(t.rows)
    >>> svg.startswith("<svg") and "best@k" in svg and "c1" in svg
    True
    >>> "<rect" in routes_svg(t.rows)
    True

Pure: the functions return strings (SVG, text) and JSON-ready objects; ``write_support_report``
is the one that writes files. The SVGs are self-contained (no scripts, no external assets), so
an HTML report can inline them.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from certd.support import Interval, SupportChange, SupportFigures
from certd.v1 import authority_pb2

from ..support import SupportRow

__all__ = [
    "decisions_json",
    "decisions_table",
    "routes_svg",
    "rows_from_decisions",
    "support_svg",
    "write_support_report",
]

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
_W, _H, _PAD = 640, 280, 48


def _ordered(values: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    for v in values:
        seen.setdefault(v, None)
    return list(seen)


def support_svg(rows: Sequence[SupportRow]) -> str:
    """best@k (solid) and pass@1 (dashed) per task over checkpoints, as an SVG line chart."""
    ckpts = _ordered([r.checkpoint for r in rows])
    tasks = _ordered([r.task for r in rows])
    step = (_W - 2 * _PAD) / max(1, len(ckpts) - 1)

    def xy(ckpt: str, value: float) -> str:
        return f"{_PAD + ckpts.index(ckpt) * step:.1f},{_H - _PAD - value * (_H - 2 * _PAD):.1f}"

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" font-family="sans-serif" font-size="11">',
        f'<text x="{_PAD}" y="16">best@k (solid) and pass@1 (dashed) per task</text>',
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#888"/>',
        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_H - _PAD}" stroke="#888"/>',
    ]
    for v in (0.0, 0.5, 1.0):
        y = _H - _PAD - v * (_H - 2 * _PAD)
        parts.append(f'<text x="{_PAD - 28}" y="{y + 4:.1f}">{v:.1f}</text>')
    for c in ckpts:
        x = _PAD + ckpts.index(c) * step
        parts.append(
            f'<text x="{x:.1f}" y="{_H - _PAD + 16}" text-anchor="middle">{html.escape(c)}</text>'
        )
    for i, task in enumerate(tasks):
        colour = _COLOURS[i % len(_COLOURS)]
        mine = [r for r in rows if r.task == task]
        for metric, dash in (("best_at_k", ""), ("pass_at_1", ' stroke-dasharray="4 3"')):
            pts = " ".join(xy(r.checkpoint, getattr(r.figures, metric)) for r in mine)
            parts.append(
                f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
            )
        parts.append(
            f'<text x="{_W - _PAD + 4}" y="{_PAD + 14 * i}" fill="{colour}">'
            f"{html.escape(task)}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def routes_svg(rows: Sequence[SupportRow]) -> str:
    """Route shares per task and checkpoint, as stacked bars (one row of bars per task)."""
    ckpts = _ordered([r.checkpoint for r in rows])
    tasks = _ordered([r.task for r in rows])
    routes = sorted({k for r in rows for k in r.figures.routes})
    band = (_H - 2 * _PAD) / max(1, len(tasks))
    width = (_W - 2 * _PAD) / max(1, len(ckpts))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" font-family="sans-serif" font-size="11">',
        f'<text x="{_PAD}" y="16">route shares per task and checkpoint</text>',
    ]
    for r in rows:
        x = _PAD + ckpts.index(r.checkpoint) * width
        top = _PAD + tasks.index(r.task) * band
        y = top
        for j, route in enumerate(routes):
            share = r.figures.routes.get(route, 0.0)
            h = share * (band - 8)
            if h > 0:
                parts.append(
                    f'<rect x="{x + 2:.1f}" y="{y:.1f}" width="{width - 4:.1f}" height="{h:.1f}" '
                    f'fill="{_COLOURS[j % len(_COLOURS)]}"><title>{html.escape(r.task)} '
                    f"{html.escape(r.checkpoint)} {html.escape(route)}: {share:.2f}</title></rect>"
                )
            y += h
    for i, task in enumerate(tasks):
        parts.append(f'<text x="4" y="{_PAD + i * band + band / 2:.1f}">{html.escape(task)}</text>')
    for c in ckpts:
        x = _PAD + ckpts.index(c) * width + width / 2
        parts.append(
            f'<text x="{x:.1f}" y="{_H - _PAD + 16}" text-anchor="middle">{html.escape(c)}</text>'
        )
    for j, route in enumerate(routes):
        parts.append(
            f'<text x="{_PAD + 60 * j}" y="{_H - 8}" fill="{_COLOURS[j % len(_COLOURS)]}">'
            f"■ {html.escape(route)}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


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
    """Write ``support.json``, ``support.svg`` and ``routes.svg`` into ``workdir``.

    Raises:
        OSError: the files cannot be written.

    Returns:
        The paths written.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    data = {"rows": [r.to_json() for r in rows], "decisions": decisions_json(decisions)}
    paths = [workdir / "support.json", workdir / "support.svg", workdir / "routes.svg"]
    paths[0].write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    paths[1].write_text(support_svg(rows) + "\n", encoding="utf-8")
    paths[2].write_text(routes_svg(rows) + "\n", encoding="utf-8")
    return paths
