"""enumerate_families cross-checked against an independent brute force over every tree."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from functools import cache

import pytest

from certd.domains.countdown import (
    CountdownRules,
    CountdownTask,
    Enumeration,
    canonical_form,
    enumerate_families,
    kappa_first_op,
    parse_expression,
    verify_countdown,
)
from certd.domains.verdict import Status
from certd.errors import InvalidInputError

Label = tuple[int, str]
Tree = tuple[Fraction, str, Label]


@cache
def _trees(seq: tuple[int, ...]) -> tuple[Tree, ...]:
    """Every tree over the numbers in this order: (value, fully bracketed text, first-op label)."""
    if len(seq) == 1:
        return ((Fraction(seq[0]), str(seq[0]), (seq[0], "")),)
    out: list[Tree] = []
    for cut in range(1, len(seq)):
        left, right = seq[:cut], seq[cut:]
        for lv, lt, ll in _trees(left):
            for rv, rt, _ in _trees(right):
                lt2 = lt if len(left) == 1 else f"({lt})"
                rt2 = rt if len(right) == 1 else f"({rt})"
                for op in "+-*/":
                    if op == "+":
                        v = lv + rv
                    elif op == "-":
                        v = lv - rv
                    elif op == "*":
                        v = lv * rv
                    elif rv == 0:
                        continue
                    else:
                        v = lv / rv
                    label = (left[0], op) if len(left) == 1 else ll
                    out.append((v, f"{lt2}{op}{rt2}", label))
    return tuple(out)


def brute(task: CountdownTask) -> dict[Label, set[str]]:
    """Every label of a tree hitting the target, with the canonical forms of those trees."""
    n = len(task.numbers)
    sizes = [n] if task.rules.exactly_once else range(1, n + 1)
    out: dict[Label, set[str]] = {}
    seqs = {
        tuple(task.numbers[i] for i in perm)
        for k in sizes
        for perm in itertools.permutations(range(n), k)
    }
    for seq in seqs:
        for value, text, label in _trees(seq):
            if value == task.target:
                out.setdefault(label, set()).add(canonical_form(parse_expression(text)))
    return out


def check_against_brute(task: CountdownTask, enum: Enumeration) -> None:
    expected = brute(task)
    got = [(w.operand, w.operator) for w in enum.labels]
    assert got == sorted(got, key=lambda lo: (lo[0], "+-*/".find(lo[1])))
    assert set(got) == set(expected), task
    for w in enum.labels:
        v = verify_countdown(task, f"<answer>{w.witness}</answer>")
        assert v.status == Status.CORRECT, (task, w)
        assert kappa_first_op(parse_expression(w.witness)).label == w.label
    assert enum.complete
    assert (
        set(enum.solutions) == set().union(*expected.values()) if expected else not enum.solutions
    )
    want = sorted(
        tuple(sorted(got.index(label) for label in labels)) for labels in _group(expected).values()
    )
    assert list(enum.families) == want, task


def _group(expected: dict[Label, set[str]]) -> dict[frozenset[str], list[Label]]:
    groups: dict[frozenset[str], list[Label]] = {}
    for label, sols in expected.items():
        groups.setdefault(frozenset(sols), []).append(label)
    return groups


def _random_tasks(seed: int, size: int, count: int) -> list[tuple[tuple[int, ...], int]]:
    rng = random.Random(seed)
    tasks = []
    for _ in range(count):
        top = rng.choice([6, 12, 100])
        nums = tuple(rng.randint(1, top) for _ in range(size))
        trees = _trees(nums)
        if rng.random() < 0.7:
            value = rng.choice(trees)[0]
            target = int(value) if value.denominator == 1 and 0 <= value <= 10**6 else 24
        else:
            target = rng.randint(0, 60)
        tasks.append((nums, target))
    return tasks


RULES = [CountdownRules(exactly_once=True), CountdownRules(exactly_once=False)]
RANDOM = _random_tasks(7, 3, 40) + _random_tasks(11, 4, 40)
FIXED = [
    ((25, 5, 4, 3), 83),
    ((2, 2, 5), 20),
    ((2, 2, 5), 0),
    ((3, 3, 8, 8), 24),
    ((1, 1, 1, 1), 0),
    ((5, 5, 5, 1), 24),
    ((7, 7, 7, 7), 1),
    ((4, 6), 0),
    ((9,), 9),
    ((9,), 3),
    ((1, 2, 3, 4), 1000),
    ((1, 3, 4, 6, 6), 24),
]


@pytest.mark.parametrize("rules", RULES, ids=["exactly-once", "at-most-once"])
@pytest.mark.parametrize(("numbers", "target"), FIXED + RANDOM)
def test_enumeration_matches_brute_force(
    numbers: tuple[int, ...], target: int, rules: CountdownRules
) -> None:
    task = CountdownTask(numbers=numbers, target=target, rules=rules)
    check_against_brute(task, enumerate_families(task))


def test_worked_example_83() -> None:
    enum = enumerate_families(CountdownTask(numbers=(25, 5, 4, 3), target=83))
    assert [w.label for w in enum.labels] == ["3,+", "3,-", "4,*", "25,-"]
    assert enum.families == ((0,), (1,), (2, 3))
    assert enum.solutions == ("3+4*(25-5)", "3-4*(5-25)", "4*(25-3)-5")


def test_six_numbers_812() -> None:
    enum = enumerate_families(CountdownTask(numbers=(75, 50, 2, 3, 8, 7), target=812))
    assert enum.complete
    assert len(enum.labels) == 18
    assert len(enum.solutions) == 9
    assert len(enum.families) == 16
    task = CountdownTask(numbers=(75, 50, 2, 3, 8, 7), target=812)
    for w in enum.labels:
        assert verify_countdown(task, w.witness).status == Status.CORRECT
        assert kappa_first_op(parse_expression(w.witness)).label == w.label


def test_no_solution_gives_no_labels() -> None:
    enum = enumerate_families(CountdownTask(numbers=(1, 1), target=5))
    assert enum == Enumeration(labels=(), families=(), complete=True, solutions=(), certifiable=0)


def test_cap_leaves_labels_exact_and_families_singletons() -> None:
    task = CountdownTask(numbers=(1, 2, 3, 4), target=10)
    full = enumerate_families(task)
    capped = enumerate_families(task, max_solutions=2)
    assert full.complete and len(full.solutions) > 2
    assert not capped.complete
    assert [w.label for w in capped.labels] == [w.label for w in full.labels]
    assert capped.families == tuple((i,) for i in range(len(full.labels)))
    assert capped.solutions == ()


def test_max_solutions_is_validated() -> None:
    task = CountdownTask(numbers=(1, 2), target=3)
    with pytest.raises(InvalidInputError):
        enumerate_families(task, max_solutions=0)


@pytest.mark.parametrize("seed", range(4))
def test_family_witnesses_are_distinct_solutions_where_possible(seed: int) -> None:
    for numbers, target in _random_tasks(100 + seed, 4, 20):
        task = CountdownTask(numbers=numbers, target=target)
        enum = enumerate_families(task)
        reps = {canonical_form(parse_expression(enum.labels[f[0]].witness)) for f in enum.families}
        assert len(reps) >= enum.certifiable
        assert enum.certifiable <= min(len(enum.families), len(enum.solutions))
        if enum.families:
            assert enum.certifiable >= 1
