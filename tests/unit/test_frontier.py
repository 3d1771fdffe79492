"""The frontier analysis (issue 33): the upper hull, the excess at equal pass@1, the decision."""

from __future__ import annotations

import doctest
import itertools
import random
from typing import Any

import pytest
import torch

import forkgate.jobs.experiment.frontier as frontier
from forkgate.jobs.experiment.frontier import (
    decide,
    excess,
    frontier_analysis,
    hull_at,
    interpolate,
    multi_family,
    upper_hull,
)


def _best_mix(points: list[tuple[float, float]], x: float) -> float | None:
    """Brute force: the highest EC reachable at pass@1 x by mixing two points (or one)."""
    best = None
    for (x1, y1), (x2, y2) in itertools.product(points, repeat=2):
        if x1 <= x <= x2 and x1 < x2:
            y = y1 + (x - x1) / (x2 - x1) * (y2 - y1)
        elif x1 == x == x2:
            y = max(y1, y2)
        else:
            continue
        best = y if best is None else max(best, y)
    return best


def test_the_upper_hull_is_the_best_mixture_of_two_points() -> None:
    rng = random.Random(3)
    for _ in range(200):
        pts = [(round(rng.random(), 2), round(rng.random(), 2)) for _ in range(rng.randint(1, 7))]
        hull = upper_hull(pts)
        for x in [p[0] for p in pts] + [rng.random() for _ in range(5)]:
            want, got = _best_mix(pts, x), hull_at(hull, x)
            assert (got is None) == (want is None)
            if want is not None:
                assert got == pytest.approx(want, abs=1e-9)


def _rec(p1: float, ec: float, **more: Any) -> dict[str, Any]:
    return {"end": {"pass@1 multi": p1, "EC@16 multi": ec}, **more}


def _runs(arm_points: list[tuple[float, float]]) -> dict[str, dict[int, dict[str, Any]]]:
    runs: dict[str, dict[int, dict[str, Any]]] = {"start": {}, "grpo": {}, "x": {}}
    for s, (p1, ec) in enumerate(arm_points):
        runs["start"][s] = _rec(0.20, 0.60)
        interp = [{"step": 200, "alpha": 0.5, "pass@1 multi": 0.26, "EC@16 multi": 0.50}]
        runs["grpo"][s] = _rec(0.30, 0.30, steps=200, interp=interp, curve=[])
        runs["x"][s] = _rec(p1, ec, steps=200, curve=[{"step": 60, "pass@1": 0.22, "EC@16": 0.7}])
    return runs


def test_excess_is_measured_at_equal_pass1_against_the_hull() -> None:
    # hull: (0.20, 0.60) → (0.26, 0.50) → (0.30, 0.30); at 0.28 it is 0.40
    runs = _runs([(0.28, 0.45), (0.28, 0.46), (0.28, 0.47), (0.35, 0.9)])
    assert excess(runs, "x", 200) == pytest.approx([5.0, 6.0, 7.0])  # 0.35: outside, left out
    # at step 60 the curve point (0.22, 0.7) against the hull's 0.60 - (0.02/0.06)·0.10
    assert excess(runs, "x", 60)[0] == pytest.approx(100 * (0.7 - (0.6 - 0.1 / 3)), abs=1e-3)
    doc = frontier_analysis(runs)
    assert doc["x"]["200"]["decision"] == "recommended" and doc["x"]["200"]["mean"] == 6.0


def test_the_decision_rule_fixed_in_advance() -> None:
    assert decide([3.0, 3.5, 4.0])["decision"] == "recommended"
    assert (
        decide([0.5, 1.0, 1.5])["decision"]
        == "not worth shipping over early stopping/interpolation"
    )
    assert decide([-4.0, 2.0, 8.0])["decision"] == "undecided"  # mean 2
    assert decide([-10.0, 8.0, 11.0])["decision"] == "undecided"  # mean 3, interval spans 0
    assert decide([5.0])["decision"] == "insufficient data"


def test_interpolation_mixes_the_weights() -> None:
    from forkgate.jobs.policy.policy import Policy

    start = Policy.load(None)
    end = Policy.load(None)
    with torch.no_grad():
        for p in end.model.parameters():
            p.add_(1.0)
    mid = interpolate(start, end, 0.25)
    for a, b, m in zip(
        start.model.parameters(), end.model.parameters(), mid.model.parameters(), strict=True
    ):
        assert torch.allclose(m, 0.75 * a + 0.25 * b)
    assert multi_family([["a"], ["a", "b"], [], ["c", "d", "e"]]) == [1, 3]


def test_doctests() -> None:
    assert doctest.testmod(frontier).failed == 0


def test_the_report_table() -> None:
    from forkgate.jobs.experiment.frontier import frontier_markdown

    lines = frontier_markdown({"x": {"60": decide([3.0, 3.5, 4.0]), "200": decide([1.0])}})
    assert lines[3] == "| x | 60 | 3 | +3.5 [+2.3, +4.7] | recommended |"
    assert lines[4] == "| x | 200 | 1 | +1.0 (one seed, no interval) | insufficient data |"
    assert frontier_markdown(None) == []
