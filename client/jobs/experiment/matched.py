"""KL-Cov, Clip-Cov and the entry KL compared at a matched entropy budget.

Each method runs as a sweep of one knob (``kl-cov@0.002 … kl-cov@0.2``, or at full share
``kl-cov@1/1 … kl-cov@1/10``; ``grpo+kl@0.1 …``); nothing is tuned inside a run. The
interpolation runs over entropy, so the arms of one configuration should sweep one knob: the
knob reported is each arm's own (``_knob``). For each seed, the method's arms give points (exact
feasible-entry entropy at the end, pass@1, EC@16, knob); the budget is the end feasible
entropy of a reference arm at that seed (default ``grpo-unscored``) or a given number. The
matched pass@1 and EC@16 are the linear interpolations between the two sweep points that
bracket the budget; a seed whose sweep does not reach the budget has no matched value (no
extrapolation). Across seeds: the matched values' paired differences from the reference arm,
with t and bootstrap intervals (``stats.interval``).

Example:
    >>> pts = [(0.2, 0.40, 0.45, 0.01), (0.6, 0.30, 0.60, 0.1)]
    >>> _at(pts, 0.4)
    {'pass@1': 0.35, 'EC@16': 0.525, 'knob': 0.055}
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from .arms import parse_arm
from .options import ExperimentOptions
from .stats import interval

__all__ = ["METHODS", "matched_comparison"]

METHODS = ("kl-cov", "clip-cov", "grpo+kl")
"""The methods swept over their knob (the arm's base name)."""

Runs = Mapping[str, Mapping[int, Mapping[str, Any]]]
Point = tuple[float, float, float, float]  # (feasible entropy, pass@1, EC@16, knob)


def _knob(arm: str) -> float:
    """The knob a sweep varies: the second knob where set (``kl-cov@1/10``: 10), else the
    share of a token-level arm, else the entry KL's weight."""
    spec = parse_arm(arm)
    if spec.kl_cov_coef is not None:
        return spec.kl_cov_coef
    if spec.clip_cov_lb is not None:
        return spec.clip_cov_lb
    if spec.loss != "pg":
        return ExperimentOptions.cov_ratio if spec.cov_ratio is None else spec.cov_ratio
    return spec.kl_weight


def _at(points: Sequence[Point], h: float) -> dict[str, float] | None:
    """pass@1, EC@16 and the knob interpolated at entropy ``h``; None outside the sweep."""
    pts = sorted(points)
    for (h0, p0, e0, k0), (h1, p1, e1, k1) in itertools.pairwise(pts):
        if h0 <= h <= h1:
            w = 0.0 if h1 == h0 else (h - h0) / (h1 - h0)
            return {
                "pass@1": round(p0 + w * (p1 - p0), 4),
                "EC@16": round(e0 + w * (e1 - e0), 4),
                "knob": round(k0 + w * (k1 - k0), 5),
            }
    if len(pts) == 1 and abs(pts[0][0] - h) < 1e-9:
        return {"pass@1": pts[0][1], "EC@16": pts[0][2], "knob": pts[0][3]}
    return None


def _method(runs: Runs, method: str, budget: Mapping[int, float], ref: str) -> dict[str, Any]:
    arms = sorted(a for a in runs if a.partition("@")[0] == method)
    per_seed: dict[int, dict[str, float] | None] = {}
    for s, h in sorted(budget.items()):
        pts = [
            (r["end"]["feasible_entropy"], r["end"]["pass@1"], r["end"]["EC@16"], _knob(a))
            for a in arms
            if (r := runs[a].get(s)) is not None
        ]
        per_seed[s] = _at(pts, h)
    hit = {s: v for s, v in per_seed.items() if v is not None}
    out: dict[str, Any] = {"arms": arms, "per_seed": per_seed, "seeds_matched": sorted(hit)}
    for m in ("knob", "pass@1", "EC@16") if hit else ():
        out[m] = round(sum(v[m] for v in hit.values()) / len(hit), 5)
    for m in ("pass@1", "EC@16"):
        base = runs.get(ref, {})
        d = [100 * (v[m] - base[s]["end"][m]) for s, v in hit.items() if s in base]
        if len(d) >= 2:
            out[f"Δ{m} vs {ref}"] = interval(d)
    return out


def matched_comparison(
    runs: Runs, *, ref: str = "grpo-unscored", budget: float | None = None
) -> dict[str, Any]:
    """Each method of ``METHODS`` at the entropy budget (``ref``'s per seed, or ``budget``)."""
    seeds = sorted({s for a in runs for s in runs[a]})
    if budget is None:
        target = {s: float(r["end"]["feasible_entropy"]) for s, r in runs.get(ref, {}).items()}
    else:
        target = {s: budget for s in seeds}
    return {
        "budget": "per-seed end feasible entropy of " + ref if budget is None else budget,
        "ref": ref,
        "methods": {m: _method(runs, m, target, ref) for m in METHODS},
    }


def markdown(doc: Mapping[str, Any]) -> list[str]:
    """The matched comparison as Markdown lines."""
    lines = [
        "",
        f"Matched entropy budget ({doc['budget']}): each method interpolated between the two "
        "sweep points that bracket it, per seed; '–' where its sweep does not reach it.",
        "",
        f"| Method | arms | seeds matched | knob at budget | pass@1 | EC@16 | "
        f"Δpass@1 vs {doc['ref']} | ΔEC@16 vs {doc['ref']} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, m in doc["methods"].items():
        cells = [
            name, ", ".join(m["arms"]) or "–", str(len(m["seeds_matched"])),
            str(m.get("knob", "–")), str(m.get("pass@1", "–")), str(m.get("EC@16", "–")),
        ]  # fmt: skip
        for key in ("pass@1", "EC@16"):
            p = m.get(f"Δ{key} vs {doc['ref']}")
            cells.append(
                "–" if p is None else f"{p['mean']:+.1f} [{p['t95'][0]:+.1f}, {p['t95'][1]:+.1f}]"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return lines
