"""Metrics against brute force and hand-computed values."""

from __future__ import annotations

import doctest
import itertools
import math

import pytest

import forkgate.metrics
from forkgate.metrics import (
    EntropyAlarm,
    EntropyMonitor,
    best_at_k,
    ec_at_k,
    entry_entropy,
    family_completion_rates,
    first_token_entropy,
    pass_at_k,
)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_matches_enumerating_every_subset(n: int) -> None:
    for c in range(n + 1):
        samples = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(samples, k))
            want = sum(any(s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(want, abs=1e-12)


def test_pass_at_k_rejects_bad_arguments() -> None:
    for n, c, k in [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


def test_best_at_k_is_the_effective_support_share() -> None:
    prompts = [[True] * 4, [False] * 4, [True, False, False, False]]
    assert best_at_k(prompts, 4) == pytest.approx(2 / 3)
    assert best_at_k(prompts, 1) == pytest.approx((1 + 0 + 0.25) / 3)
    with pytest.raises(ValueError):
        best_at_k([], 1)


def test_ec_family_rates_and_entropies() -> None:
    assert ec_at_k(["a", "a", "b"], feasible=3) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        ec_at_k(["a"], feasible=0)
    rates = family_completion_rates([("a", True), ("a", False), ("b", True)])
    assert [(r.family, r.correct, r.total, r.rate) for r in rates.values()] == [
        ("a", 1, 2, 0.5),
        ("b", 1, 1, 1.0),
    ]
    assert entry_entropy([]) == 0.0
    assert entry_entropy(["x"] * 5) == 0.0
    assert entry_entropy(["a", "b", "c", "d"]) == pytest.approx(math.log(4))
    uniform = {"a": math.log(0.5), "b": math.log(0.5)}
    assert first_token_entropy([uniform, {"a": 0.0}]) == pytest.approx(math.log(2) / 2)
    # unnormalised top-k log-probs are renormalised over the top k
    assert first_token_entropy([{"a": -3.0, "b": -3.0}]) == pytest.approx(math.log(2))
    with pytest.raises(ValueError):
        first_token_entropy([{}])


def test_entropy_monitor_floor_drop_and_cooldown() -> None:
    seen: list[EntropyAlarm] = []
    monitor = EntropyMonitor(floor=0.2, max_drop=0.5, cooldown_steps=2, on_alarm=seen.append)
    assert monitor(0, 1.2) is None
    assert monitor(1, 0.9) is None
    alarm = monitor(2, 0.5)
    assert alarm is not None and "dropped" in alarm.reason
    assert monitor(3, 0.4) is None  # cooldown
    low = monitor(4, 0.1)
    assert low is not None and "below the floor" in low.reason
    assert seen == [alarm, low] == monitor.alarms


def test_module_example_runs() -> None:
    assert doctest.testmod(forkgate.metrics).failed == 0
