"""Guard policies: the alarm, route-balanced batches, support-aware mixing, bounded recovery."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from forkgate.guard import Mode, RecoveryController, RouteBalancer, SupportAlarm, SupportMixer


def test_alarm_fires_only_when_pass_rises_and_best_falls() -> None:
    seen = []
    alarm = SupportAlarm(min_rise=0.01, min_fall=0.01, on_alarm=seen.append)
    assert alarm(0, "t", pass_at_1=0.3, best_at_k=0.8) is None
    assert alarm(1, "t", pass_at_1=0.35, best_at_k=0.85) is None  # both rise
    assert alarm(2, "t", pass_at_1=0.30, best_at_k=0.70) is None  # both fall
    event = alarm(3, "t", pass_at_1=0.40, best_at_k=0.60)
    assert event is not None and event.best_at_k_fall == pytest.approx(0.10)
    assert alarm(4, "u", pass_at_1=0.9, best_at_k=0.1) is None  # another task's first
    assert seen == [event]


@pytest.mark.parametrize("floor", [0.0, 0.1, 0.2, 0.25])
def test_route_balancer_keeps_every_route_above_the_floor(floor: float) -> None:
    rng = random.Random(0)
    routes = ["direct"] * 90 + ["step"] * 8 + ["other"] * 30 + ["table"] * 12
    rng.shuffle(routes)
    items = list(enumerate(routes))
    batch = RouteBalancer(floor, seed=1).build(items, lambda x: x[1], 40)
    assert len(batch) == 40 and len({i for i, _ in batch}) == 40
    counts = Counter(r for _, r in batch)
    for route, have in Counter(routes).items():
        assert counts[route] >= min(have, round(floor * 40)), (route, counts)


def test_route_balancer_refuses_unmeetable_floors() -> None:
    with pytest.raises(ValueError):
        RouteBalancer(0.4).build([1, 2, 3], lambda x: x, 3)
    assert RouteBalancer(0.5).build([1, 2], lambda x: x, 10) in ([1, 2], [2, 1])


def test_mixer_moves_data_to_eroded_tasks_and_keeps_a_floor() -> None:
    mix = SupportMixer({"math": 0.5, "ifeval": 0.5}, gain=4.0, min_weight=0.1)
    assert mix({}) == {"math": 0.5, "ifeval": 0.5}
    w = mix({"math": 0.25, "ifeval": -0.3})
    assert w["math"] == pytest.approx(2 / 3) and w["ifeval"] == pytest.approx(1 / 3)
    w = SupportMixer({"a": 0.5, "b": 0.5}, gain=100.0, min_weight=0.1)({"a": 1.0})
    assert w["b"] == pytest.approx(0.1) and w["a"] == pytest.approx(0.9)
    with pytest.raises(ValueError):
        SupportMixer({"a": 0.0})


def test_recovery_has_hysteresis() -> None:
    rec = RecoveryController(enter_below=0.5, exit_above=0.7, min_dwell_steps=0)
    modes = [rec(s, v) for s, v in enumerate([0.6, 0.45, 0.6, 0.69, 0.71, 0.55, 0.49])]
    assert modes == [Mode.NORMAL, Mode.RECOVERY, Mode.RECOVERY, Mode.RECOVERY, Mode.NORMAL,
                     Mode.NORMAL, Mode.RECOVERY]  # fmt: skip


def test_recovery_respects_dwell_time() -> None:
    rec = RecoveryController(enter_below=0.5, exit_above=0.7, min_dwell_steps=3)
    modes = [rec(s, v) for s, v in enumerate([0.1, 0.9, 0.9, 0.9, 0.9])]
    assert modes == [Mode.RECOVERY, Mode.RECOVERY, Mode.RECOVERY, Mode.NORMAL, Mode.NORMAL]


def test_recovery_stops_switching_after_its_budget() -> None:
    exhausted = []
    rec = RecoveryController(
        enter_below=0.5, exit_above=0.7, min_dwell_steps=1, max_switches=3,
        on_exhausted=exhausted.append,
    )  # fmt: skip
    for step in range(200):  # a figure that would flip the mode at every step
        rec(step, 0.0 if step % 2 == 0 else 1.0)
    assert len(rec.switches) == 3 and rec.exhausted and exhausted == [3]


def test_recovery_refuses_no_hysteresis() -> None:
    with pytest.raises(ValueError):
        RecoveryController(enter_below=0.5, exit_above=0.5)
