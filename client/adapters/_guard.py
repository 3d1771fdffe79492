"""A trainer that cannot silently stop learning: every batch's left-out rollouts are counted.

Example::

    guard = LeftOutGuard()                        # defaults: all left out, or 3 refusing steps
    counts = guard.check(statuses)                # raises TrainingStalledError, else counts
    log.info("step %d: %d refused, %d unscored", counts.step, counts.refused, counts.unscored)

A rollout is *left out* of training when the ratchet refused its group (``REFUSED``) or certd
could not score it (``INFRA_ERROR``: certd down, past its deadline, failing server-side). A
batch of left-out rollouts trains on nothing while the loss, the optimizer and the logs carry
on: the failure this guard turns into an error. It raises when

* the left-out fraction of one batch reaches ``max_left_out_fraction`` (default 1.0: every
  rollout of the batch), or
* the ratchet refused at least one rollout in each of ``max_refusing_steps`` consecutive
  batches (default 3; 0 turns this check off).

``max_left_out_fraction=None`` turns the first check off. The guard does no I/O and imports
no framework; both adapters (``forkgate.adapters.trl``, ``forkgate.adapters.verl``) call it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import TrainingStalledError
from ..ratchet import Admission

__all__ = ["LeftOutCounts", "LeftOutGuard", "describe_refusals"]

log = logging.getLogger("forkgate.adapters")

REFUSED = "REFUSED"
UNSCORED = "INFRA_ERROR"


@dataclass(frozen=True, slots=True)
class LeftOutCounts:
    """One batch's rollouts and how many of them training leaves out.

    Attributes:
        step: the batch's number, from 1.
        total: rollouts in the batch.
        refused: rollouts the ratchet refused.
        unscored: rollouts certd could not score (infrastructure failures).
    """

    step: int
    total: int
    refused: int
    unscored: int

    @property
    def left_out(self) -> int:
        """Rollouts that carry no training signal."""
        return self.refused + self.unscored


def describe_refusals(refusals: Sequence[Admission], limit: int = 3) -> str:
    """The most frequent refusal reasons, ``"UNPROVEN_CHECKPOINT: no consistency proof …"``."""
    reasons: Counter[str] = Counter()
    for a in refusals:
        for reason, detail in a.reasons:
            reasons[f"{reason.value}: {detail}"] += 1
    return "; ".join(f"{text} (x{n})" if n > 1 else text for text, n in reasons.most_common(limit))


class LeftOutGuard:
    """Counts each batch's refused and unscored rollouts; raises when training stalls.

    Args:
        max_left_out_fraction: raise when this fraction of one batch (or more) is left out;
            1.0 (the default) raises only on a batch where nothing is trained on; None never.
        max_refusing_steps: raise when the ratchet refused rollouts in this many consecutive
            batches; 0 never.

    Raises:
        ValueError: a setting is out of range.
    """

    def __init__(
        self, *, max_left_out_fraction: float | None = 1.0, max_refusing_steps: int = 3
    ) -> None:
        if max_left_out_fraction is not None and not 0.0 < max_left_out_fraction <= 1.0:
            raise ValueError(
                f"expected max_left_out_fraction in (0, 1] or None, got {max_left_out_fraction}"
            )
        if max_refusing_steps < 0:
            raise ValueError(f"expected max_refusing_steps >= 0, got {max_refusing_steps}")
        self.max_left_out_fraction = max_left_out_fraction
        self.max_refusing_steps = max_refusing_steps
        self.steps = 0
        self.refusing_streak = 0
        self.last: LeftOutCounts | None = None

    def check(self, statuses: Iterable[str], refusals: Sequence[Admission] = ()) -> LeftOutCounts:
        """Count one batch (one status per rollout), log the counts, raise if training stalls.

        Args:
            statuses: each rollout's status (``"REFUSED"``, ``"INFRA_ERROR"`` or a verdict's).
            refusals: the ratchet's refusals of the batch (their reasons go into the error).

        Raises:
            TrainingStalledError: the batch, or the run of batches, trains on too little.

        Returns:
            The batch's counts.
        """
        seen = list(statuses)
        self.steps += 1
        counts = LeftOutCounts(self.steps, len(seen), seen.count(REFUSED), seen.count(UNSCORED))
        self.last = counts
        log.info(
            "forkgate step %d: %d rollouts, %d refused, %d unscored",
            counts.step, counts.total, counts.refused, counts.unscored,
        )  # fmt: skip
        self.refusing_streak = self.refusing_streak + 1 if counts.refused else 0
        limit = self.max_left_out_fraction
        if counts.total and limit is not None and counts.left_out >= limit * counts.total:
            raise TrainingStalledError(self._message(counts, refusals), counts=counts)
        if self.max_refusing_steps and self.refusing_streak >= self.max_refusing_steps:
            raise TrainingStalledError(
                f"the ratchet refused rollouts in {self.refusing_streak} consecutive batches "
                f"(max_refusing_steps={self.max_refusing_steps}); latest: "
                + self._message(counts, refusals),
                counts=counts,
            )
        return counts

    def _message(self, counts: LeftOutCounts, refusals: Sequence[Admission]) -> str:
        text = (
            f"batch {counts.step}: {counts.left_out} of {counts.total} rollouts left out "
            f"({counts.refused} refused by the ratchet, {counts.unscored} unscored: certd "
            "unreachable or failing)"
        )
        why = describe_refusals(refusals)
        if why:
            text += f"; refusals: {why}"
        if counts.unscored:
            text += "; check that certd is up and reachable at the configured address"
        return text
