"""Guard policies for multi-task RLVR: small objects a training loop calls between steps.

Example:
    >>> alarm = SupportAlarm()
    >>> alarm(0, "ifeval", pass_at_1=0.40, best_at_k=0.80) is None
    True
    >>> alarm(1, "ifeval", pass_at_1=0.47, best_at_k=0.70).reason
    'ifeval: pass@1 rose 0.070 (0.400 -> 0.470) while best@k fell 0.100 (0.800 -> 0.700)'
    >>> rec = RecoveryController(enter_below=0.5, exit_above=0.7, min_dwell_steps=2,
    ...                          max_switches=2)
    >>> [rec(step, v).value for step, v in enumerate([0.9, 0.4, 0.4, 0.8, 0.3, 0.3, 0.9])]
    ['normal', 'recovery', 'recovery', 'normal', 'normal', 'normal', 'normal']

Each policy is a plain object with ``__call__`` (so a TRL ``TrainerCallback.on_evaluate`` or a
verl hook can call it with the figures of ``forkgate.support``), keeps its own history, and
does no I/O:

* ``SupportAlarm`` — pass@1 rises while best@k falls (support polarises: the research note's
  IFEval +6.5 pass@1 / −9.8 best@32).
* ``RouteBalancer`` — builds batches in which every route present keeps at least ``floor``
  of the batch, so no single entry monopolises the gradient.
* ``SupportMixer`` — task mixing weights that grow for tasks whose support shrank.
* ``RecoveryController`` — switches between normal training and a support-recovery mode with
  hysteresis (enter below one threshold, leave above a higher one), a minimum dwell time and
  a maximum number of switches: it cannot oscillate forever.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = [
    "Mode",
    "RecoveryController",
    "RouteBalancer",
    "SupportAlarm",
    "SupportAlarmEvent",
    "SupportMixer",
    "Switch",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SupportAlarmEvent:
    """pass@1 rose while best@k fell on one task."""

    step: int
    task: str
    pass_at_1_rise: float
    best_at_k_fall: float
    reason: str


@dataclass
class SupportAlarm:
    """Alarm when a task's pass@1 rises while its best@k falls, against its previous figures.

    Attributes:
        min_rise: pass@1 must rise by more than this.
        min_fall: best@k must fall by more than this.
        on_alarm: called with each alarm.
    """

    min_rise: float = 0.0
    min_fall: float = 0.0
    on_alarm: Callable[[SupportAlarmEvent], None] | None = None
    alarms: list[SupportAlarmEvent] = field(default_factory=list)
    _last: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False)

    def observe(
        self, step: int, task: str, *, pass_at_1: float, best_at_k: float
    ) -> SupportAlarmEvent | None:
        """Record one evaluation; return the alarm it raised, if any."""
        previous = self._last.get(task)
        self._last[task] = (pass_at_1, best_at_k)
        if previous is None:
            return None
        rise, fall = pass_at_1 - previous[0], previous[1] - best_at_k
        if rise <= self.min_rise or fall <= self.min_fall:
            return None
        event = SupportAlarmEvent(
            step,
            task,
            rise,
            fall,
            f"{task}: pass@1 rose {rise:.3f} ({previous[0]:.3f} -> {pass_at_1:.3f}) while "
            f"best@k fell {fall:.3f} ({previous[1]:.3f} -> {best_at_k:.3f})",
        )
        self.alarms.append(event)
        if self.on_alarm is not None:
            self.on_alarm(event)
        return event

    def __call__(
        self, step: int, task: str, *, pass_at_1: float, best_at_k: float
    ) -> SupportAlarmEvent | None:
        """Same as ``observe``."""
        return self.observe(step, task, pass_at_1=pass_at_1, best_at_k=best_at_k)


@dataclass
class RouteBalancer:
    """Builds batches in which each route present among the candidates keeps a share >= floor.

    Args:
        floor: the least share of the batch each route gets (when it has enough candidates);
            ``floor × routes`` must not exceed 1.
        seed: the RNG seed of the fill (deterministic batches).
    """

    floor: float
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.floor <= 1.0:
            raise ValueError(f"floor: expected 0..1, got {self.floor}")
        self._rng = random.Random(self.seed)

    def build(self, candidates: Sequence[T], route: Callable[[T], Hashable], size: int) -> list[T]:
        """A batch of ``size`` candidates (fewer when there are fewer candidates).

        Every route gets ``ceil(floor × size)`` slots first (or all its candidates when it has
        fewer); the rest is filled uniformly at random from what is left. Candidates are
        taken without replacement.

        Raises:
            ValueError: ``floor × routes > 1`` (the floors cannot all be met) or size < 0.
        """
        if size < 0:
            raise ValueError(f"size: expected >= 0, got {size}")
        by_route: dict[Hashable, list[int]] = {}
        for i, c in enumerate(candidates):
            by_route.setdefault(route(c), []).append(i)
        if self.floor * len(by_route) > 1.0 + 1e-12:
            raise ValueError(f"floor {self.floor} × {len(by_route)} routes exceeds the whole batch")
        size = min(size, len(candidates))
        quota = math.ceil(self.floor * size - 1e-9)
        chosen: list[int] = []
        for idx in by_route.values():
            pool = idx[:]
            self._rng.shuffle(pool)
            chosen.extend(pool[: min(quota, len(pool), size - len(chosen))])
        taken = set(chosen)
        rest = [i for i in range(len(candidates)) if i not in taken]
        self._rng.shuffle(rest)
        chosen.extend(rest[: size - len(chosen)])
        self._rng.shuffle(chosen)
        return [candidates[i] for i in chosen]

    def __call__(
        self, candidates: Sequence[T], route: Callable[[T], Hashable], size: int
    ) -> list[T]:
        """Same as ``build``."""
        return self.build(candidates, route, size)


@dataclass
class SupportMixer:
    """Mixing weights across tasks: tasks whose support shrank get more data.

    ``weight_t ∝ base_t × (1 + gain × max(0, SER_t))``, normalised, then raised to at least
    ``min_weight`` and normalised again. SER is the relative fall of best@k since the task's
    previous figures (``forkgate.support``); a task whose support grew keeps its base weight.

    Args:
        base: the base weight of each task (e.g. dataset sizes or a schedule).
        gain: how strongly erosion pulls data towards a task.
        min_weight: the least share any task keeps.
    """

    base: Mapping[str, float]
    gain: float = 4.0
    min_weight: float = 0.05
    history: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.base or any(w < 0 for w in self.base.values()) or sum(self.base.values()) <= 0:
            raise ValueError("base: expected non-negative weights with a positive sum")
        if self.gain < 0 or not 0.0 <= self.min_weight * len(self.base) <= 1.0:
            raise ValueError("expected gain >= 0 and min_weight × tasks <= 1")

    def weights(self, ser: Mapping[str, float]) -> dict[str, float]:
        """The mixing weights for the next phase from each task's SER (missing: 0)."""
        raw = {t: b * (1.0 + self.gain * max(0.0, ser.get(t, 0.0))) for t, b in self.base.items()}
        z = sum(raw.values())
        w = {t: v / z for t, v in raw.items()}
        low = [t for t, v in w.items() if v < self.min_weight]
        if low:
            rest = 1.0 - self.min_weight * len(low)
            others = sum(v for t, v in w.items() if t not in low)
            w = {
                t: self.min_weight if t in low else (v / others * rest if others else 0.0)
                for t, v in w.items()
            }
        self.history.append(w)
        return w

    def __call__(self, ser: Mapping[str, float]) -> dict[str, float]:
        """Same as ``weights``."""
        return self.weights(ser)


class Mode(enum.StrEnum):
    """The recovery controller's mode."""

    NORMAL = "normal"
    RECOVERY = "recovery"


@dataclass(frozen=True, slots=True)
class Switch:
    """One mode switch."""

    step: int
    to: Mode
    value: float


@dataclass
class RecoveryController:
    """Normal training ↔ support recovery, with hysteresis, dwell time and a switch budget.

    Enter RECOVERY when the guarded figure (e.g. the worst task's best@k) falls below
    ``enter_below``; leave it when the figure rises above ``exit_above`` (> ``enter_below``:
    the gap is the hysteresis). No switch happens within ``min_dwell_steps`` of the previous
    one, and after ``max_switches`` switches the mode stays where it is (``exhausted``), so the
    loop cannot oscillate forever; ``on_exhausted`` is told once (stop, or ask a person).

    Args:
        enter_below: switch to recovery below this.
        exit_above: switch back to normal above this.
        min_dwell_steps: the least number of steps between two switches.
        max_switches: the most switches over the controller's life.
        on_switch: called with each switch.
        on_exhausted: called once when a switch is wanted but the budget is spent.
    """

    enter_below: float
    exit_above: float
    min_dwell_steps: int = 1
    max_switches: int = 4
    on_switch: Callable[[Switch], None] | None = None
    on_exhausted: Callable[[int], None] | None = None
    mode: Mode = Mode.NORMAL
    switches: list[Switch] = field(default_factory=list)
    exhausted: bool = False
    _last_switch: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.exit_above > self.enter_below:
            raise ValueError(
                f"hysteresis: expected exit_above > enter_below, got {self.exit_above} <= "
                f"{self.enter_below}"
            )
        if self.min_dwell_steps < 0 or self.max_switches < 0:
            raise ValueError("expected min_dwell_steps >= 0 and max_switches >= 0")

    def observe(self, step: int, value: float) -> Mode:
        """Record the guarded figure at ``step``; return the mode for the next phase."""
        wanted = self.mode
        if self.mode is Mode.NORMAL and value < self.enter_below:
            wanted = Mode.RECOVERY
        elif self.mode is Mode.RECOVERY and value > self.exit_above:
            wanted = Mode.NORMAL
        if wanted is self.mode:
            return self.mode
        if self._last_switch is not None and step - self._last_switch < self.min_dwell_steps:
            return self.mode
        if len(self.switches) >= self.max_switches:
            if not self.exhausted:
                self.exhausted = True
                if self.on_exhausted is not None:
                    self.on_exhausted(step)
            return self.mode
        switch = Switch(step, wanted, value)
        self.mode = wanted
        self._last_switch = step
        self.switches.append(switch)
        if self.on_switch is not None:
            self.on_switch(switch)
        return self.mode

    def __call__(self, step: int, value: float) -> Mode:
        """Same as ``observe``."""
        return self.observe(step, value)
