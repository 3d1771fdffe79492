"""Coverage and capability metrics: EC@K, pass@k, best@k, family completion, entry entropy.

Example:
    >>> round(pass_at_k(n=10, c=3, k=2), 4)
    0.5333
    >>> ec_at_k(["25,-", "25,-", "4,*"], feasible=4)
    0.5
    >>> round(entry_entropy(["25,-", "25,-", "4,*", "3,+"]), 4)
    1.0397

Definitions (the research notes behind the design; ``docs/metrics.md``):

* **EC@K** — distinct entry families among the *correct* samples of K draws, divided by the
  number of feasible families of the task.
* **pass@k** — the unbiased estimator of Chen et al. (2021) from n samples with c correct:
  ``1 - C(n-c, k) / C(n, k)``.
* **best@k** — the share of prompts with at least one success among k samples (the prompts
  in the *effective support*); from n >= k samples per prompt it is the mean of the unbiased
  pass@k over prompts.
* **entry entropy** — Shannon entropy (nats) of the κ-label distribution of the samples.
* **first-token entropy** — entropy of the first generated token's distribution, estimated
  from the top-k log-probabilities a backend returns (renormalised over the top k, so it is a
  lower-resolution estimate of the full entropy).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from certd.effective_support import (
    pass_at_k,  # the unbiased estimator (Chen et al., 2021), pure stdlib
)

from .coverage_metrics import ec_at_k_counts, family_correct_counts

__all__ = [
    "EntropyAlarm",
    "EntropyMonitor",
    "FamilyRate",
    "best_at_k",
    "default_monitor",
    "ec_at_k",
    "entry_entropy",
    "family_completion_rates",
    "first_token_entropy",
    "pass_at_k",
]


def best_at_k(correct_per_prompt: Sequence[Sequence[bool]], k: int) -> float:
    """Share of prompts with at least one success in k tries (mean unbiased pass@k).

    Args:
        correct_per_prompt: per prompt, the correctness of each of its n >= k samples.
        k: the budget.

    Raises:
        ValueError: a prompt has fewer than k samples, or there are no prompts.
    """
    if not correct_per_prompt:
        raise ValueError("expected at least one prompt")
    return sum(pass_at_k(len(s), sum(map(bool, s)), k) for s in correct_per_prompt) / len(
        correct_per_prompt
    )


def ec_at_k(correct_families: Iterable[str], feasible: int) -> float:
    """EC@K from exactly K draws: distinct families among the correct samples ÷ feasible.

    With n > K draws use ``forkgate.coverage_metrics.ec_at_k_counts`` (the unbiased
    estimator); this is its n = K case.

    Args:
        correct_families: the κ labels of the correct samples among the K draws.
        feasible: the task's feasible families (from enumeration or certification).

    Raises:
        ValueError: ``feasible`` is not positive.
    """
    if feasible <= 0:
        raise ValueError(f"feasible: expected > 0, got {feasible}")
    counts = family_correct_counts(correct_families)
    n = max(1, sum(counts.values()))
    return ec_at_k_counts(counts, n=n, k=n, feasible=feasible)  # the one EC computation


@dataclass(frozen=True, slots=True)
class FamilyRate:
    """How often samples that start in a family complete correctly."""

    family: str
    correct: int
    total: int

    @property
    def rate(self) -> float:
        """correct / total."""
        return self.correct / self.total


def family_completion_rates(samples: Iterable[tuple[str, bool]]) -> dict[str, FamilyRate]:
    """Per-family completion rates from (κ label, correct) pairs, sorted by family."""
    total: Counter[str] = Counter()
    correct: Counter[str] = Counter()
    for family, ok in samples:
        total[family] += 1
        correct[family] += bool(ok)
    return {f: FamilyRate(f, correct[f], total[f]) for f in sorted(total)}


def entry_entropy(families: Iterable[str]) -> float:
    """Shannon entropy (nats) of the κ-label distribution; 0.0 for no samples."""
    counts = Counter(families)
    n = sum(counts.values())
    return -sum((c / n) * math.log(c / n) for c in counts.values()) if n else 0.0


def first_token_entropy(top_logprobs: Sequence[Mapping[str, float]]) -> float:
    """Mean entropy (nats) of first-token distributions from top-k log-probabilities.

    Each mapping is one sample's first-token top-k ``{token: logprob}``; the probabilities are
    renormalised over the top k.

    Raises:
        ValueError: no samples, or a sample with no log-probabilities.
    """
    if not top_logprobs:
        raise ValueError("expected at least one sample")
    total = 0.0
    for dist in top_logprobs:
        if not dist:
            raise ValueError("a sample has no first-token log-probabilities")
        top = max(dist.values())
        weights = [math.exp(lp - top) for lp in dist.values()]
        z = sum(weights)
        total -= sum((w / z) * math.log(w / z) for w in weights if w > 0)
    return total / len(top_logprobs)


@dataclass(frozen=True, slots=True)
class EntropyAlarm:
    """Entry entropy fell below the floor or dropped too far from its best."""

    step: int
    entropy: float
    reason: str


@dataclass
class EntropyMonitor:
    """Raises an alarm when entry entropy falls below ``floor`` or drops by ``max_drop``.

    Call ``observe`` with each evaluation's entropy (or pass it as a callback: calling the
    monitor does the same). An alarm repeats at most once per ``cooldown_steps``.

    Attributes:
        floor: alarm when entropy < floor (nats).
        max_drop: alarm when entropy < (1 - max_drop) × the highest entropy seen so far.
        cooldown_steps: steps between two alarms.
        on_alarm: called with each alarm (e.g. log, stop training).
    """

    floor: float = 0.0
    max_drop: float = 0.5
    cooldown_steps: int = 0
    on_alarm: Callable[[EntropyAlarm], None] | None = None
    best: float = field(default=0.0, init=False)
    alarms: list[EntropyAlarm] = field(default_factory=list, init=False)
    _last_alarm: int | None = field(default=None, init=False, repr=False)

    def observe(self, step: int, entropy: float) -> EntropyAlarm | None:
        """Record one measurement; return the alarm it raised, if any."""
        self.best = max(self.best, entropy)
        reason = ""
        if entropy < self.floor:
            reason = f"entry entropy {entropy:.4f} is below the floor {self.floor:.4f}"
        elif self.best > 0 and entropy < (1 - self.max_drop) * self.best:
            reason = (
                f"entry entropy {entropy:.4f} dropped {1 - entropy / self.best:.0%} from its "
                f"best {self.best:.4f} (limit {self.max_drop:.0%})"
            )
        if not reason:
            return None
        if self._last_alarm is not None and step - self._last_alarm < self.cooldown_steps:
            return None
        alarm = EntropyAlarm(step, entropy, reason)
        self._last_alarm = step
        self.alarms.append(alarm)
        if self.on_alarm is not None:
            self.on_alarm(alarm)
        return alarm

    def __call__(self, step: int, entropy: float) -> EntropyAlarm | None:
        """Same as ``observe``."""
        return self.observe(step, entropy)


def default_monitor(monitor: EntropyMonitor | bool) -> EntropyMonitor | None:
    """The adapters' ``entropy_monitor`` argument: True (their default) gives
    ``EntropyMonitor(max_drop=0.5)``, False none, a monitor itself."""
    if monitor is True:
        return EntropyMonitor(max_drop=0.5)
    return monitor or None
