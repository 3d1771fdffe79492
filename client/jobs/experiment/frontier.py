"""The frontier experiment (issue 33): GRPO's pass@1–coverage frontier and an arm's excess.

Run side (``ExperimentOptions.frontier``): every ``eval_every`` steps each arm is evaluated on
the multi-family held-out tasks; the ``grpo`` arm also keeps its checkpoint
(``checkpoints/grpo-seed{s}-step{n}.safetensors``) and evaluates the weight interpolations
θ = (1 − α) θ_start + α θ_GRPO(step) for each α in ``interp_alphas``.

Analysis side: per seed, GRPO's frontier is the upper concave hull of the points (pass@1,
EC@16) over the multi-family tasks — the start, GRPO's evaluations and the interpolations. An
arm's *excess* at a step is its EC@16 minus the hull's at its pass@1 (None outside the hull's
pass@1 range: never extrapolated); the primary outcome is its mean over seeds with t95, in
points (× 100). Decision, fixed in advance (``docs/experiment-countdown.md``): mean ≥ +3 with
the t95 interval above 0 → ``recommended``; mean ≤ +1 → ``not worth shipping over early
stopping/interpolation``; otherwise ``undecided``.

Example:
    >>> hull = upper_hull([(0.2, 0.5), (0.25, 0.6), (0.3, 0.4), (0.25, 0.45)])
    >>> hull
    [(0.2, 0.5), (0.25, 0.6), (0.3, 0.4)]
    >>> round(hull_at(hull, 0.275), 4), hull_at(hull, 0.35)
    (0.5, None)
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .stats import interval

__all__ = [
    "ALL_TASKS_AT",
    "decide",
    "excess",
    "frontier_analysis",
    "frontier_markdown",
    "grpo_frontier",
    "hull_at",
    "interpolate",
    "multi_family",
    "save_checkpoint",
    "upper_hull",
]

Point = tuple[float, float]  # (pass@1, EC@16) over the multi-family tasks

ALL_TASKS_AT = (60,)
"""Frontier runs evaluate every held-out task (not only the multi-family ones) at these steps,
besides the start and the end."""


def multi_family(feasible: Sequence[Sequence[Any]]) -> list[int]:
    """Indexes of the held-out tasks with at least two feasible families."""
    return [i for i, fams in enumerate(feasible) if len(fams) >= 2]


def interpolate(start: Any, end: Any, alpha: float) -> Any:
    """A copy of ``start`` with weights (1 − α)·θ_start + α·θ_end (float tensors only)."""
    out = copy.deepcopy(start)
    a, b = start.model.state_dict(), end.model.state_dict()
    mixed = {
        k: (1 - alpha) * v + alpha * b[k] if v.is_floating_point() else v for k, v in a.items()
    }
    out.model.load_state_dict(mixed)
    out.model.eval()
    return out


def save_checkpoint(policy: Any, workdir: Path, seed: int, step: int) -> Path:
    """Keep GRPO's weights at ``step`` (safetensors, with the config beside them)."""
    path = workdir / "checkpoints" / f"grpo-seed{seed}-step{step}.safetensors"
    policy.save(path, {"seed": seed, "step": step})
    return path


def upper_hull(points: Sequence[Point]) -> list[Point]:
    """The upper concave hull of the points, by increasing pass@1 (Andrew's monotone chain)."""
    top: dict[float, float] = {}
    for x, y in points:  # at one pass@1 only the highest EC@16 can be on the hull
        top[x] = max(y, top.get(x, y))
    pts = sorted(top.items())
    hull: list[Point] = []
    for p in pts:
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) >= 0:
                hull.pop()  # hull[-1] lies on or below the chord hull[-2] → p
            else:
                break
        hull.append(p)
    return hull


def hull_at(hull: Sequence[Point], x: float) -> float | None:
    """The hull's EC@16 at pass@1 ``x``, linear between vertices; None outside its range."""
    if not hull or x < hull[0][0] - 1e-12 or x > hull[-1][0] + 1e-12:
        return None
    for (x1, y1), (x2, y2) in itertools.pairwise(hull):
        if x1 - 1e-12 <= x <= x2 + 1e-12:
            return y1 if x2 == x1 else y1 + (x - x1) / (x2 - x1) * (y2 - y1)
    return hull[0][1]


def _point(p: Mapping[str, Any]) -> Point:
    """(pass@1, EC@16) over the multi-family tasks (a multi-only evaluation has only these)."""
    p1, ec = p.get("pass@1 multi"), p.get("EC@16 multi")
    return (float(p["pass@1"] if p1 is None else p1), float(p["EC@16"] if ec is None else ec))


def _at(rec: Mapping[str, Any], step: int) -> Mapping[str, Any] | None:
    if step == rec.get("steps"):
        end: Mapping[str, Any] = rec["end"]
        return end
    return next((c for c in rec.get("curve", []) if c["step"] == step), None)


def grpo_frontier(start: Mapping[str, Any], grpo: Mapping[str, Any]) -> list[Point]:
    """One seed's GRPO frontier: start, GRPO's evaluations and the interpolations."""
    pts = [_point(start["end"]), _point(grpo["end"])]
    pts += [_point(c) for c in grpo.get("curve", [])]
    pts += [_point(c) for c in grpo.get("interp", [])]
    return upper_hull(pts)


Runs = Mapping[str, Mapping[int, Mapping[str, Any]]]  # arm → seed → record


def excess(runs: Runs, arm: str, step: int) -> list[float]:
    """Per seed, the arm's EC@16 above GRPO's frontier at its pass@1, in points."""
    out = []
    for seed, rec in sorted(runs.get(arm, {}).items()):
        if seed not in runs.get("start", {}) or seed not in runs.get("grpo", {}):
            continue
        p = _at(rec, step)
        if p is None:
            continue
        x, y = _point(p)
        h = hull_at(grpo_frontier(runs["start"][seed], runs["grpo"][seed]), x)
        if h is not None:
            out.append(round(100 * (y - h), 4))
    return out


def decide(d: Sequence[float]) -> dict[str, Any]:
    """The pre-registered decision on an arm's excess values (points)."""
    if len(d) < 2:  # the one seed's value is shown, never a decision
        return {"n": len(d), "values": list(d), "decision": "insufficient data"}
    iv = interval(list(d))
    if iv["mean"] >= 3 and iv["t95"][0] > 0:
        verdict = "recommended"
    elif iv["mean"] <= 1:
        verdict = "not worth shipping over early stopping/interpolation"
    else:
        verdict = "undecided"
    return {**iv, "decision": verdict}


def frontier_analysis(runs: Runs, at: Sequence[int] = (60, 200)) -> dict[str, Any]:
    """Per arm (not start or grpo) and step in ``at``: the excess over seeds and the decision.

    A record's step is its ``curve`` entry at that step, or its ``end`` when the record's
    ``steps`` equal it (frontier runs record ``steps``).
    """
    arms = sorted(a for a in runs if a not in ("start", "grpo"))
    return {a: {str(s): decide(excess(runs, a, s)) for s in at} for a in arms}


def frontier_markdown(doc: Mapping[str, Any] | None) -> list[str]:
    """The frontier table of the analysis report (none without frontier records)."""
    if not doc:
        return []
    lines = ["", "| Arm | step | seeds | EC@16 above GRPO's frontier (points) [t95] | decision |",
             "|---|---|---|---|---|"]  # fmt: skip
    for arm, by_step in doc.items():
        for step, d in by_step.items():
            iv = "–"
            if "mean" in d:
                iv = f"{d['mean']:+.1f} [{d['t95'][0]:+.1f}, {d['t95'][1]:+.1f}]"
            elif d.get("values"):
                iv = f"{d['values'][0]:+.1f} (one seed, no interval)"
            lines.append(f"| {arm} | {step} | {d['n']} | {iv} | {d['decision']} |")
    return lines
