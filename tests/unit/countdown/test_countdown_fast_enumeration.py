"""The fast enumerator (issue 31 follow-up) against the one it replaced, on generated tasks.

Every certificate signs its task's ``feasible`` counts (``count_families``), and
EnumerateFamilies serves ``enumerate_families``: both must be exactly what the search before the
speed-up gave (``reference_enumeration``, kept verbatim), on every size the config allows, both
rules, reachable and unreachable targets, repeated numbers, zeros in intermediate values and
the solution caps that make an enumeration incomplete.
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

import pytest
import reference_enumeration as reference

from certd.config import CountdownConfig
from certd.domains.countdown import (
    CountdownRules,
    CountdownTask,
    FamilyCount,
    count_families,
    enumerate_families,
)

MAX_NUMBERS = CountdownConfig.model_fields["max_enumerate_numbers"].default
POOLS = ((1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 25, 50, 75, 100), (1, 1, 2, 2, 3), (1, 2, 3, 4))
CAPS = (1, 3, 20, 200_000)


def _value(rng: random.Random, numbers: tuple[int, ...]) -> Fraction:
    """The value of a random expression over a random nonempty subset (a reachable target)."""
    vals = [Fraction(x) for x in rng.sample(numbers, rng.randint(1, len(numbers)))]
    while len(vals) > 1:
        a, b = vals.pop(rng.randrange(len(vals))), vals.pop(rng.randrange(len(vals)))
        op = rng.choice("+-*/")
        vals.append(a + b if op == "+" else a - b if op == "-" else a * b if op == "*" or not b
                    else a / b)  # fmt: skip
    return vals[0]


def _task(rng: random.Random, size: int) -> CountdownTask:
    numbers = tuple(rng.choice(rng.choice(POOLS)) for _ in range(size))
    value = _value(rng, numbers)
    reachable = value.denominator == 1 and value >= 0 and rng.random() < 0.7
    target = int(value) if reachable else rng.randint(0, 999)
    rules = CountdownRules(exactly_once=rng.random() < 0.5)
    return CountdownTask(numbers=numbers, target=target, rules=rules)


def _generated(seed: int, per_size: dict[int, int]) -> list[CountdownTask]:
    rng = random.Random(seed)
    return [_task(rng, size) for size, n in per_size.items() for _ in range(n)]


def _plain(e: Any) -> tuple[object, ...]:
    """An enumeration's every field as plain values (the two modules' classes differ)."""
    labels = tuple((lw.operand, lw.operator, lw.witness) for lw in e.labels)
    return (labels, e.families, e.complete, e.solutions, e.certifiable)


def _assert_same(task: CountdownTask, cap: int) -> None:
    want = reference.enumerate_families(task, max_solutions=cap)
    got = enumerate_families(task, max_solutions=cap)
    assert _plain(got) == _plain(want), (task, cap)
    counts = count_families(task, max_solutions=cap)
    assert counts == FamilyCount(
        labels=len({lw.label for lw in want.labels}),
        families=len(want.families),
        complete=want.complete,
    ), (task, cap)


@pytest.mark.parametrize("cap", CAPS)
def test_small_tasks_enumerate_exactly_as_before(cap: int) -> None:
    for task in _generated(31 + cap, {1: 20, 2: 60, 3: 120, 4: 120}):
        _assert_same(task, cap)


def test_five_number_tasks_enumerate_exactly_as_before() -> None:
    for task in _generated(5, {5: 40}):
        _assert_same(task, 200_000 if task.rules.exactly_once else 2_000)


def test_largest_tasks_enumerate_exactly_as_before() -> None:
    """The largest size the config allows by default (6), under a cap that keeps it short."""
    assert MAX_NUMBERS == 6
    for task in _generated(6, {6: 8}):
        _assert_same(task, 500)


@pytest.mark.parametrize(
    ("numbers", "target", "exactly_once"),
    [
        ((25, 5, 4, 3), 83, True),  # the docs' example: 4 labels, 3 families
        ((25, 5, 4, 3), 1000, True),  # unreachable
        ((3, 3, 3, 3), 0, False),  # free operands (0 * anything), duplicates
        ((1, 1, 1, 1, 1), 1, True),  # identities everywhere
        ((7,), 7, True),
        ((7,), 8, False),
        ((2, 2), 1, False),
    ],
)
def test_edge_tasks_enumerate_exactly_as_before(
    numbers: tuple[int, ...], target: int, exactly_once: bool
) -> None:
    task = CountdownTask(numbers, target, CountdownRules(exactly_once=exactly_once))
    for cap in CAPS:
        _assert_same(task, cap)


def test_counts_of_a_permuted_task_are_the_same() -> None:
    """The counts are of the number multiset: any order of the numbers signs the same."""
    rng = random.Random(7)
    for task in _generated(8, {3: 30, 4: 40}):
        shuffled = list(task.numbers)
        rng.shuffle(shuffled)
        permuted = CountdownTask(tuple(shuffled), task.target, task.rules)
        assert count_families(permuted) == count_families(task), task
