"""Seeded Countdown puzzles for demos, tests and benchmarks (no eval: targets are built).

Example:
    >>> p = countdown_puzzles(2, seed=7)
    >>> len(p), len(p[0]["numbers"])
    (2, 4)
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["countdown_puzzles", "puzzle_task", "small_countdown_puzzles"]

_SMALL = tuple(range(1, 11)) * 2
_LARGE = (25, 50, 75, 100)


def _combine(rng: random.Random, values: list[int]) -> int | None:
    """Fold the values with random operators, keeping every step a positive integer."""
    pool = values[:]
    rng.shuffle(pool)
    acc = pool[0]
    for v in pool[1:]:
        ops = ["+", "*"]
        if acc > v:
            ops.append("-")
        if v > 1 and acc % v == 0:
            ops.append("/")
        op = rng.choice(ops)
        acc = acc + v if op == "+" else acc * v if op == "*" else acc - v if op == "-" else acc // v
    return acc


def countdown_puzzles(
    n: int, *, numbers: int = 4, seed: int = 0, target_range: tuple[int, int] = (10, 999)
) -> list[dict[str, Any]]:
    """``n`` solvable Countdown puzzles ``{"domain": "countdown", "numbers": [...], "target": t}``.

    The flat form keeps ``p["numbers"]`` readable; as a task it is the deprecated alias of
    ``{"domain": "countdown", "task": {"numbers", "target"}}`` (see ``puzzle_task``).

    Args:
        n: how many.
        numbers: numbers per puzzle (at most one or two large numbers, the rest small).
        seed: the RNG seed; the same seed gives the same puzzles.
        target_range: inclusive bounds for the target.

    Returns:
        Puzzles whose target is reachable using every number exactly once.
    """
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    lo, hi = target_range
    while len(out) < n:
        large = rng.randint(0, min(2, numbers - 1))
        values = rng.sample(_LARGE, large) + rng.sample(_SMALL, numbers - large)
        target = _combine(rng, values)
        if target is not None and lo <= target <= hi:
            out.append({"domain": "countdown", "numbers": values, "target": target})
    return out


def small_countdown_puzzles(
    n: int,
    *,
    seed: int = 0,
    sizes: tuple[int, ...] = (3, 4),
    max_number: int = 12,
    target_range: tuple[int, int] = (1, 100),
) -> list[dict[str, Any]]:
    """``n`` solvable puzzles with small numbers: the embedded policy's distribution.

    Args:
        n: how many.
        seed: the RNG seed; the same seed gives the same puzzles.
        sizes: how many numbers a puzzle may have (drawn uniformly).
        max_number: numbers are drawn from 1..max_number (repeats allowed).
        target_range: inclusive bounds for the target.

    Returns:
        Puzzles whose target is reachable using every number exactly once.
    """
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    lo, hi = target_range
    while len(out) < n:
        values = [rng.randint(1, max_number) for _ in range(rng.choice(sizes))]
        target = _combine(rng, values)
        if target is not None and lo <= target <= hi:
            out.append({"domain": "countdown", "numbers": values, "target": target})
    return out


def puzzle_task(puzzle: dict[str, Any]) -> dict[str, Any]:
    """The task object ``{"domain": "countdown", "task": {"numbers", "target"}}`` of a puzzle.

    Example:
        >>> puzzle_task({"domain": "countdown", "numbers": [3, 4], "target": 7})
        {'domain': 'countdown', 'task': {'numbers': [3, 4], 'target': 7}}
    """
    return {
        "domain": "countdown",
        "task": {k: v for k, v in puzzle.items() if k in ("numbers", "target", "rules")},
    }
