"""Unbiased EC@K against brute-force subsampling of every K-subset of the n draws."""

from __future__ import annotations

import doctest
import itertools
import random

import pytest

import forkgate.coverage_metrics
from forkgate.coverage_metrics import (
    ec_at_k_counts,
    ec_of_rows,
    family_correct_counts,
    solution_coverage,
    solution_coverage_of_rows,
)
from forkgate.metrics import ec_at_k


def _brute(draws: list[str | None], k: int, feasible: int) -> float:
    """Mean over every K-subset of distinct correct families ÷ feasible (None: a wrong draw)."""
    subsets = list(itertools.combinations(draws, k))
    return sum(len({d for d in s if d is not None}) for s in subsets) / len(subsets) / feasible


def _random_draws(rng: random.Random, n: int, fams: int) -> list[str | None]:
    return [rng.choice([None, *(f"f{i}" for i in range(fams))]) for _ in range(n)]


@pytest.mark.parametrize("n", range(1, 9))
def test_ec_matches_enumerating_every_k_subset(n: int) -> None:
    rng = random.Random(n)
    for _ in range(12):
        fams = rng.randint(1, 4)
        draws = _random_draws(rng, n, fams)
        counts = family_correct_counts(d for d in draws if d is not None)
        for k in range(1, n + 1):
            got = ec_at_k_counts(counts, n=n, k=k, feasible=fams)
            assert got == pytest.approx(_brute(draws, k, fams), abs=1e-12)


def test_ec_with_n_equal_k_is_the_plain_count() -> None:
    rng = random.Random(7)
    for n in range(1, 10):
        draws = _random_draws(rng, n, 3)
        correct = [d for d in draws if d is not None]
        assert ec_at_k_counts(family_correct_counts(correct), n=n, k=n, feasible=3) == (
            pytest.approx(ec_at_k(correct, 3))
        )


def test_ec_over_more_draws_overstates_ec_at_k() -> None:
    # 32 draws: one family hit twice. The plain count says 1/2; EC@16 is (1 - C(30,16)/C(32,16))/2.
    counts = {"a": 2}
    plain = ec_at_k(["a", "a"], 2)
    unbiased = ec_at_k_counts(counts, n=32, k=16, feasible=2)
    assert plain == 0.5
    assert unbiased == pytest.approx((1 - (16 * 15) / (32 * 31)) / 2)
    assert unbiased < plain


def test_ec_rejects_bad_counts() -> None:
    bad = [({"a": 1}, 4, 5), ({"a": 1}, 4, 0), ({"a": -1}, 4, 2), ({"a": 3, "b": 2}, 4, 2)]
    for counts, n, k in bad:
        with pytest.raises(ValueError):
            ec_at_k_counts(counts, n=n, k=k, feasible=2)
    assert ec_at_k_counts({}, n=4, k=2, feasible=0) == 0.0


def test_rows_report_multi_family_tasks_beside_all() -> None:
    rows = [
        {"family_correct": {"0": 4}, "samples": 4, "feasible": 1},
        {"family_correct": {"0": 2, "1": 0}, "samples": 4, "feasible": 2},
    ]
    out = ec_of_rows(rows, 2)
    single, multi = 1.0, (1 - 1 / 6) / 2
    assert out["EC@2"] == round((single + multi) / 2, 4)
    assert out["EC@2 multi"] == round(multi, 4)
    assert out["multi_tasks"] == 1
    assert ec_of_rows(rows[:1], 2)["EC@2 multi"] is None


def test_solution_coverage() -> None:
    assert solution_coverage(["a", "a", "b", "c"]) == 0.75
    assert solution_coverage([]) is None


@pytest.mark.parametrize("seed", range(40))
def test_solution_coverage_properties(seed: int) -> None:
    """Against a brute-force definition over random canonical solutions of random tasks:
    the pooled figure is Σ distinct ÷ Σ solutions, lies in [1/n, 1], ignores order, is 1
    exactly when no solution repeats, and a repeated solution never raises it."""
    rng = random.Random(seed)
    tasks = [
        [f"s{rng.randrange(rng.randint(1, 6))}" for _ in range(rng.randint(0, 12))]
        for _ in range(rng.randint(1, 5))
    ]
    rows = [{"solution_counts": family_correct_counts(t)} for t in tasks]
    got = solution_coverage_of_rows(rows)
    n = sum(len(t) for t in tasks)
    distinct = sum(len(set(t)) for t in tasks)  # one solution of two tasks is two solutions
    assert got["solutions"] == n and got["distinct_solutions"] == distinct
    if n == 0:
        assert got["solution_coverage"] is None
        return
    cov = got["solution_coverage"]
    assert cov == round(distinct / n, 4) and 1 / n - 1e-4 <= cov <= 1
    assert (cov == 1) == all(len(set(t)) == len(t) for t in tasks)
    shuffled = [{"solution_counts": family_correct_counts(rng.sample(t, len(t)))} for t in tasks]
    assert solution_coverage_of_rows(shuffled[::-1]) == got
    for t in tasks:  # per task it is solution_coverage of the task's list
        assert solution_coverage(t) == (round(len(set(t)) / len(t), 4) if t else None)
    grown = [*tasks[0], tasks[0][0]] if tasks[0] else ["s0"]
    more = solution_coverage_of_rows([{"solution_counts": family_correct_counts(grown)}, *rows[1:]])
    if tasks[0]:
        assert more["solution_coverage"] is not None and more["solution_coverage"] <= cov + 1e-4
    assert solution_coverage_of_rows([*rows, {"samples": 3}]) == got  # rows without counts


def test_doctests() -> None:
    assert doctest.testmod(forkgate.coverage_metrics).failed == 0
