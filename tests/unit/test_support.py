"""Support figures, SER intervals and JSD: against plain-Python references and forkgate.metrics."""

from __future__ import annotations

import math
import random

import pytest

from certd.effective_support import (
    Interval,
    PromptOutcome,
    jensen_shannon,
    support_change,
    support_figures,
)
from forkgate.metrics import best_at_k
from forkgate.support import SupportTracker, first_token_distribution, format_table


def _outcomes(rng: random.Random, m: int, n: int, p: float) -> list[PromptOutcome]:
    return [PromptOutcome(str(i), n, sum(rng.random() < p for _ in range(n))) for i in range(m)]


def test_figures_match_a_plain_loop() -> None:
    rng = random.Random(3)
    correct = [[rng.random() < 0.3 for _ in range(8)] for _ in range(40)]
    outcomes = [PromptOutcome(str(i), 8, sum(s)) for i, s in enumerate(correct)]
    f = support_figures(outcomes, 4, routes=["a", "b", "a", "a"], families=["x"])
    assert f.best_at_k == pytest.approx(best_at_k(correct, 4))
    assert f.pass_at_1 == pytest.approx(sum(sum(s) for s in correct) / (40 * 8))
    assert f.all_correct == sum(all(s) for s in correct) / 40
    assert f.all_wrong == sum(not any(s) for s in correct) / 40
    assert f.all_correct + f.mixed + f.all_wrong == pytest.approx(1.0)
    assert f.routes == {"a": 0.75, "b": 0.25} and f.families == {"x": 1.0}


def test_fewer_samples_than_k_is_refused() -> None:
    with pytest.raises(ValueError):
        support_figures([PromptOutcome("a", 2, 1)], 4)
    with pytest.raises(ValueError):
        PromptOutcome("a", 2, 3)


def test_ser_of_a_clear_erosion_is_positive_and_not_noise() -> None:
    rng = random.Random(0)
    before = _outcomes(rng, 60, 8, 0.4)
    after = [PromptOutcome(o.prompt, 8, 0 if i % 2 else o.c) for i, o in enumerate(before)]
    change = support_change(before, after, 8, resamples=500, seed=1)
    assert change.paired
    assert change.ser.estimate > 0.3
    assert change.ser.low > 0 and not change.within_noise
    assert change.best_at_k.high < 0


def test_identical_evaluations_are_within_noise() -> None:
    rng = random.Random(1)
    before = _outcomes(rng, 30, 8, 0.2)
    change = support_change(before, list(before), 8, resamples=300)
    assert change.best_at_k.estimate == 0.0 and change.within_noise


def test_unpaired_resamples_each_side() -> None:
    rng = random.Random(2)
    a = _outcomes(rng, 30, 8, 0.3)
    b = [PromptOutcome("x" + o.prompt, o.n, o.c) for o in _outcomes(rng, 30, 8, 0.3)]
    change = support_change(a, b, 8, resamples=300)
    assert not change.paired
    assert change.best_at_k.low < change.best_at_k.estimate < change.best_at_k.high


def test_interval_is_deterministic_for_a_seed() -> None:
    rng = random.Random(4)
    a, b = _outcomes(rng, 20, 4, 0.3), _outcomes(rng, 20, 4, 0.5)
    assert support_change(a, b, 4, seed=9) == support_change(a, b, 4, seed=9)


def test_jensen_shannon_reference_values() -> None:
    assert jensen_shannon({"a": 1.0}, {"a": 2.0}) == 0.0
    assert jensen_shannon({"a": 1.0}, {"b": 1.0}) == pytest.approx(math.log(2))
    p, q = {"a": 0.5, "b": 0.5}, {"a": 0.9, "b": 0.1}
    m = {"a": 0.7, "b": 0.3}
    kl = lambda x, y: sum(x[t] * math.log(x[t] / y[t]) for t in x)  # noqa: E731
    assert jensen_shannon(p, q) == pytest.approx(0.5 * kl(p, m) + 0.5 * kl(q, m))
    with pytest.raises(ValueError):
        jensen_shannon({}, {"a": 1.0})


def test_interval_roundtrip_and_noise_flag() -> None:
    iv = Interval(-0.1, -0.2, 0.05, 0.95)
    assert Interval.from_json(iv.to_json()) == iv and iv.within_noise
    assert not Interval(0.2, 0.1, 0.3, 0.95).within_noise


def test_tracker_compares_consecutive_checkpoints_and_jsd_to_reference() -> None:
    t = SupportTracker(k=4, resamples=200)
    ft_base = [{"Step": -0.2, "The": -1.8}] * 8
    ft_direct = [{"Step": -3.0, "The": -0.05}] * 8
    t.observe("c0", "a", [[True] * 4, [False] * 4], routes=["s"] * 8, first_token_logprobs=ft_base)
    t.observe("c0", "b", [[True, False, False, False]] * 2, routes=["s"] * 8)
    row = t.observe(
        "c1", "a", [[False] * 4, [False] * 4], routes=["d"] * 8, first_token_logprobs=ft_direct
    )
    assert row.change is not None and row.ser is not None and row.ser.estimate == 1.0
    assert row.route_jsd == pytest.approx(math.log(2))
    assert row.first_token_jsd is not None and row.first_token_jsd > 0.3
    assert set(t.latest()) == {"a", "b"}
    table = format_table(t.rows)
    assert "c1" in table and "+1.000" in table
    assert sum(first_token_distribution(ft_base).values()) == pytest.approx(1.0)


def test_tracker_refuses_mismatched_prompt_ids() -> None:
    t = SupportTracker(k=1)
    with pytest.raises(ValueError):
        t.observe("c0", "a", [[True]], prompt_ids=["x", "y"])


def test_route_of_reads_the_family_or_the_other_labels() -> None:
    from certd.v1 import tasks_pb2, verifier_pb2
    from forkgate.support import route_of

    v = verifier_pb2.Verdict(
        family=tasks_pb2.Label(kappa="math.first-step.v1", value="c3"),
        labels=[tasks_pb2.Label(kappa="math.route.v1", value="step-by-step")],
    )
    assert route_of(v) == "step-by-step"
    assert route_of(v, "math.first-step.v1") == "c3"
    cd = verifier_pb2.Verdict(
        family=tasks_pb2.Label(
            kappa="countdown.first-op.v1", value="25,-", fields={"operand": "25", "operator": "-"}
        )
    )
    assert route_of(cd, "countdown.first-op.v1", "operator") == "-"
    assert route_of(cd) == "none" and route_of(verifier_pb2.Verdict()) == "none"
