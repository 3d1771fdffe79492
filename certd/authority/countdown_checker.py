"""Countdown's checker: pure, bounded code, checked in process (see ``certd.domains.countdown``).

Large batches go to the service's ``VerifyPool`` (worker processes) instead of
``check_items``'s in-thread loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from certd.authority.checker import CheckerBase, FamilyCounts
from certd.domains import countdown as cd
from certd.domains.countdown.config import CountdownConfig
from certd.domains.verdict import Verdict
from certd.errors import LimitExceededError

__all__ = ["CountdownChecker", "countdown_checker"]


@dataclass(frozen=True)
class CountdownChecker(CheckerBase):
    """Countdown, checked in process (pure code, bounded work)."""

    limits: cd.CountdownLimits
    shaping: cd.RewardShaping
    max_enumerate_numbers: int
    max_enumerate_solutions: int
    domain: str = "countdown"
    kappa: str = cd.KAPPA
    kappas: tuple[str, ...] = (cd.KAPPA,)
    verifier: str = cd.VERIFIER

    def verify(self, task: cd.CountdownTask, response: str, *, canonical: bool = False) -> Verdict:
        """Check one response; see ``certd.domains.countdown.verify_countdown``."""
        return cd.verify_countdown(
            task, response, limits=self.limits, shaping=self.shaping, with_canonical=canonical
        )

    def verify_batch(self, pairs: Sequence[tuple[cd.CountdownTask, str]]) -> list[Verdict]:
        """Check pairs in this thread (the service sends large batches to ``VerifyPool``)."""
        return [self.verify(task, response) for task, response in pairs]

    def close(self) -> None:
        """Nothing to release: Countdown runs in process."""

    def enumerate(self, task: cd.CountdownTask) -> cd.Enumeration:
        """Enumerate feasible labels and families.

        Raises:
            LimitExceededError: more numbers than ``max_enumerate_numbers``.
        """
        self._check_size(task)
        return cd.enumerate_families(task, max_solutions=self.max_enumerate_solutions)

    def count_families(self, task: cd.CountdownTask) -> FamilyCounts:
        """The counts of ``enumerate(task)`` without its witnesses (``cd.count_families``).

        Raises:
            LimitExceededError: as ``enumerate``.
        """
        self._check_size(task)
        n = cd.count_families(task, max_solutions=self.max_enumerate_solutions)
        return FamilyCounts(labels=n.labels, families=n.families, complete=n.complete)

    def _check_size(self, task: cd.CountdownTask) -> None:
        if len(task.numbers) > self.max_enumerate_numbers:
            raise LimitExceededError(
                f"enumeration takes at most {self.max_enumerate_numbers} numbers, "
                f"got {len(task.numbers)}",
                field="task.countdown.numbers",
            )


def countdown_checker(c: CountdownConfig) -> CountdownChecker:
    """The checker of the ``countdown`` config section (the domain spec's factory)."""
    return CountdownChecker(
        limits=cd.CountdownLimits(
            max_response_chars=c.max_response_chars,
            max_expression_chars=c.max_expression_chars,
            max_depth=c.max_depth,
            max_literal_digits=c.max_literal_digits,
            max_numbers=c.max_numbers,
            max_tokens=c.max_tokens,
        ),
        shaping=cd.RewardShaping(
            correct=c.reward_correct,
            wrong_answer=c.reward_wrong_answer,
            invalid=c.reward_invalid,
        ),
        max_enumerate_numbers=c.max_enumerate_numbers,
        max_enumerate_solutions=c.max_enumerate_solutions,
    )
