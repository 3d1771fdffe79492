"""Effective support at a checkpoint, and how it changed: pure figures and their intervals.

Light and pure (no I/O, standard library only), so certd's acceptance policy and the
``forkgate`` client compute the same numbers from the same samples.

Example:
    >>> before = [PromptOutcome("a", 4, 1), PromptOutcome("b", 4, 0), PromptOutcome("c", 4, 2)]
    >>> after = [PromptOutcome("a", 4, 0), PromptOutcome("b", 4, 0), PromptOutcome("c", 4, 4)]
    >>> f = support_figures(after, k=4, routes=["step"] * 12)
    >>> f.best_at_k, f.all_correct, f.all_wrong, f.routes
    (0.3333333333333333, 0.3333333333333333, 0.6666666666666666, {'step': 1.0})
    >>> ser = support_erosion_rate(before, after, k=4, resamples=200, seed=1)
    >>> round(ser.estimate, 4)
    0.5

Definitions (the second research note; docs/support-guard.md):

* **effective support** — the prompts with at least one success among k tries;
  **best@k** is its expected share, the mean over prompts of the unbiased pass@k from n >= k
  samples (Chen et al., 2021); **pass@1** is the mean success rate.
* **all-correct / mixed / all-wrong** — shares of prompts whose n samples were all correct,
  some correct, none correct.
* **SER** (support erosion rate) between consecutive checkpoints: the relative fall of best@k,
  ``(best@k_before - best@k_after) / best@k_before``; > 0 means support shrank.
* **intervals** — percentile bootstrap over prompts: paired (the same prompt resampled in
  both checkpoints) when both evaluations cover the same prompts, otherwise each evaluation is
  resampled on its own. A change is *within noise* when its interval contains 0.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "Interval",
    "PromptOutcome",
    "SupportChange",
    "SupportFigures",
    "jensen_shannon",
    "pass_at_k",
    "shares",
    "support_change",
    "support_erosion_rate",
    "support_figures",
]


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k from n samples with c correct (Chen et al., 2021).

    The one implementation: ``forkgate.metrics`` re-exports it (this module is pure stdlib).

    Raises:
        ValueError: unless 0 <= c <= n and 1 <= k <= n.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"expected 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


@dataclass(frozen=True, slots=True)
class PromptOutcome:
    """How one prompt fared: n samples, c of them correct.

    Attributes:
        prompt: the prompt's id (certd uses the task digest).
        n: samples drawn.
        c: samples correct.
    """

    prompt: str
    n: int
    c: int

    def __post_init__(self) -> None:
        if not (0 <= self.c <= self.n and self.n >= 1):
            raise ValueError(f"prompt {self.prompt!r}: expected 0 <= c <= n, n >= 1, got {self}")


def shares(labels: Iterable[str]) -> dict[str, float]:
    """The distribution of labels (share of each), sorted by label; {} for none."""
    counts = Counter(labels)
    total = sum(counts.values())
    return {label: counts[label] / total for label in sorted(counts)} if total else {}


@dataclass(frozen=True, slots=True)
class SupportFigures:
    """Support figures of one task set at one checkpoint.

    Attributes:
        k: the budget.
        prompts: how many prompts were evaluated.
        best_at_k: expected share of prompts in the effective support.
        pass_at_1: mean success rate.
        all_correct: share of prompts whose samples were all correct.
        mixed: share of prompts with some but not all samples correct.
        all_wrong: share of prompts with no correct sample.
        routes: share of samples per route label.
        families: share of samples per entry-family label.
    """

    k: int
    prompts: int
    best_at_k: float
    pass_at_1: float
    all_correct: float
    mixed: float
    all_wrong: float
    routes: dict[str, float] = field(default_factory=dict)
    families: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON object (the acceptance predicate's ``figures``)."""
        return {
            "all_correct": self.all_correct,
            "all_wrong": self.all_wrong,
            "best_at_k": self.best_at_k,
            "families": dict(self.families),
            "k": self.k,
            "mixed": self.mixed,
            "pass_at_1": self.pass_at_1,
            "prompts": self.prompts,
            "routes": dict(self.routes),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SupportFigures:
        """Read ``to_json``'s object back.

        Raises:
            KeyError, TypeError, ValueError: the object is malformed.
        """
        return cls(
            k=int(obj["k"]),
            prompts=int(obj["prompts"]),
            best_at_k=float(obj["best_at_k"]),
            pass_at_1=float(obj["pass_at_1"]),
            all_correct=float(obj["all_correct"]),
            mixed=float(obj["mixed"]),
            all_wrong=float(obj["all_wrong"]),
            routes={str(k): float(v) for k, v in dict(obj["routes"]).items()},
            families={str(k): float(v) for k, v in dict(obj["families"]).items()},
        )


def support_figures(
    outcomes: Sequence[PromptOutcome],
    k: int,
    *,
    routes: Iterable[str] = (),
    families: Iterable[str] = (),
) -> SupportFigures:
    """The support figures of one evaluation.

    Args:
        outcomes: one per prompt, each with n >= k samples.
        k: the budget of best@k.
        routes: the route label of every sample (any order).
        families: the entry-family label of every sample (any order).

    Raises:
        ValueError: no prompts, or a prompt with fewer than k samples.

    Returns:
        The figures.
    """
    if not outcomes:
        raise ValueError("expected at least one prompt")
    m = len(outcomes)
    return SupportFigures(
        k=k,
        prompts=m,
        best_at_k=sum(pass_at_k(o.n, o.c, k) for o in outcomes) / m,
        pass_at_1=sum(o.c / o.n for o in outcomes) / m,
        all_correct=sum(o.c == o.n for o in outcomes) / m,
        mixed=sum(0 < o.c < o.n for o in outcomes) / m,
        all_wrong=sum(o.c == 0 for o in outcomes) / m,
        routes=shares(routes),
        families=shares(families),
    )


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with a percentile bootstrap interval.

    Attributes:
        estimate: the figure on the samples drawn.
        low: the interval's lower end.
        high: the interval's upper end.
        level: its coverage (e.g. 0.95).
    """

    estimate: float
    low: float
    high: float
    level: float

    @property
    def within_noise(self) -> bool:
        """True when the interval contains 0 (the change could be sampling noise)."""
        return self.low <= 0.0 <= self.high

    def to_json(self) -> dict[str, float]:
        """A JSON object."""
        return {"estimate": self.estimate, "high": self.high, "level": self.level, "low": self.low}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Interval:
        """Read ``to_json``'s object back."""
        return cls(
            float(obj["estimate"]), float(obj["low"]), float(obj["high"]), float(obj["level"])
        )


@dataclass(frozen=True, slots=True)
class SupportChange:
    """How a task set's support changed between two evaluations (after - before).

    Attributes:
        best_at_k: change of best@k.
        pass_at_1: change of pass@1.
        ser: support erosion rate (relative fall of best@k; > 0 is erosion).
        paired: whether both evaluations covered the same prompts (paired bootstrap).
    """

    best_at_k: Interval
    pass_at_1: Interval
    ser: Interval
    paired: bool

    @property
    def within_noise(self) -> bool:
        """True when the best@k change's interval contains 0."""
        return self.best_at_k.within_noise

    def to_json(self) -> dict[str, Any]:
        """A JSON object (the acceptance predicate's ``change``)."""
        return {
            "best_at_k": self.best_at_k.to_json(),
            "paired": self.paired,
            "pass_at_1": self.pass_at_1.to_json(),
            "ser": self.ser.to_json(),
            "within_noise": self.within_noise,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SupportChange:
        """Read ``to_json``'s object back."""
        return cls(
            best_at_k=Interval.from_json(obj["best_at_k"]),
            pass_at_1=Interval.from_json(obj["pass_at_1"]),
            ser=Interval.from_json(obj["ser"]),
            paired=bool(obj["paired"]),
        )


def _ser(before: float, after: float) -> float:
    return (before - after) / before if before > 0 else 0.0


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of sorted values, linear interpolation."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


class _Sides(NamedTuple):
    """Per prompt best@k and pass@1 of both evaluations; ``after`` in ``before``'s prompt
    order when ``paired``."""

    bk_b: list[float]
    bk_a: list[float]
    p1_b: list[float]
    p1_a: list[float]
    paired: bool


def _aligned(before: Sequence[PromptOutcome], after: Sequence[PromptOutcome], k: int) -> _Sides:
    """Both sides' per prompt figures, paired when they hold the same (unique) prompt ids."""
    bk_b = [pass_at_k(o.n, o.c, k) for o in before]
    bk_a = [pass_at_k(o.n, o.c, k) for o in after]
    p1_b = [o.c / o.n for o in before]
    p1_a = [o.c / o.n for o in after]
    ids_b = [o.prompt for o in before]
    ids_a = [o.prompt for o in after]
    paired = sorted(ids_b) == sorted(ids_a) and len(set(ids_b)) == len(ids_b)
    if paired:
        where = {p: i for i, p in enumerate(ids_a)}
        order = [where[p] for p in ids_b]
        bk_a = [bk_a[i] for i in order]
        p1_a = [p1_a[i] for i in order]
    return _Sides(bk_b, bk_a, p1_b, p1_a, paired)


def _bootstrap(
    sides: _Sides, resamples: int, rng: random.Random
) -> tuple[list[float], list[float], list[float]]:
    """Bootstrap draws of the best@k, pass@1 and SER changes (each resample draws prompts;
    paired sides take the same prompts on both)."""
    mean = math.fsum
    bk_b, bk_a, p1_b, p1_a, paired = sides
    d_bk: list[float] = []
    d_p1: list[float] = []
    d_ser: list[float] = []
    nb, na = len(bk_b), len(bk_a)
    for _ in range(resamples):
        ib = [rng.randrange(nb) for _ in range(nb)]
        ia = ib if paired else [rng.randrange(na) for _ in range(na)]
        b = mean(bk_b[i] for i in ib) / nb
        a = mean(bk_a[i] for i in ia) / na
        d_bk.append(a - b)
        d_ser.append(_ser(b, a))
        d_p1.append(mean(p1_a[i] for i in ia) / na - mean(p1_b[i] for i in ib) / nb)
    return d_bk, d_p1, d_ser


def support_change(
    before: Sequence[PromptOutcome],
    after: Sequence[PromptOutcome],
    k: int,
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> SupportChange:
    """Changes of best@k, pass@1 and SER with bootstrap intervals over prompts.

    Paired when both evaluations hold the same prompt ids (each resample draws prompts and
    takes them in both); otherwise each side is resampled independently. Deterministic for a
    given ``seed``.

    Args:
        before: the earlier evaluation's outcomes.
        after: the later evaluation's outcomes.
        k: the budget (both evaluations need n >= k per prompt).
        resamples: bootstrap resamples (>= 1).
        level: interval coverage in (0, 1).
        seed: the bootstrap's random seed.

    Raises:
        ValueError: an empty evaluation, n < k, or a bad ``resamples``/``level``.

    Returns:
        The change.
    """
    if not before or not after:
        raise ValueError("expected at least one prompt on each side")
    if resamples < 1 or not 0.0 < level < 1.0:
        raise ValueError(f"expected resamples >= 1 and 0 < level < 1, got {resamples}, {level}")
    sides = _aligned(before, after, k)
    d_bk, d_p1, d_ser = _bootstrap(sides, resamples, random.Random(seed))
    tail = (1.0 - level) / 2.0

    def interval(estimate: float, draws: list[float]) -> Interval:
        draws.sort()
        return Interval(estimate, _percentile(draws, tail), _percentile(draws, 1 - tail), level)

    mean, nb, na = math.fsum, len(sides.bk_b), len(sides.bk_a)
    b_all, a_all = mean(sides.bk_b) / nb, mean(sides.bk_a) / na
    return SupportChange(
        best_at_k=interval(a_all - b_all, d_bk),
        pass_at_1=interval(mean(sides.p1_a) / na - mean(sides.p1_b) / nb, d_p1),
        ser=interval(_ser(b_all, a_all), d_ser),
        paired=sides.paired,
    )


def support_erosion_rate(
    before: Sequence[PromptOutcome],
    after: Sequence[PromptOutcome],
    k: int,
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """SER from ``before`` to ``after`` with its bootstrap interval (see ``support_change``).

    Raises:
        ValueError: as ``support_change``.
    """
    return support_change(before, after, k, resamples=resamples, level=level, seed=seed).ser


def jensen_shannon(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """Jensen–Shannon divergence (nats, in [0, ln 2]) between two distributions.

    Each mapping is normalised first (weights need not sum to 1).

    Raises:
        ValueError: a distribution is empty, has a negative weight, or sums to 0.
    """
    for name, d in (("p", p), ("q", q)):
        if not d or any(v < 0 for v in d.values()) or sum(d.values()) <= 0:
            raise ValueError(f"{name}: expected non-negative weights with a positive sum")
    zp, zq = sum(p.values()), sum(q.values())
    total = 0.0
    for key in set(p) | set(q):
        a, b = p.get(key, 0.0) / zp, q.get(key, 0.0) / zq
        m = (a + b) / 2
        if a > 0:
            total += 0.5 * a * math.log(a / m)
        if b > 0:
            total += 0.5 * b * math.log(b / m)
    return max(0.0, total)
