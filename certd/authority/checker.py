"""Domain dispatch: one checker per domain, chosen by the task's type.

Example:
    >>> from certd.config import CertdConfig
    >>> from certd.domains.countdown import CountdownTask
    >>> checkers = Checkers(CertdConfig())
    >>> checkers.for_task(CountdownTask(numbers=(25, 5, 4, 3), target=83)).kappa
    'countdown.first-op.v1'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from certd.config import CertdConfig
from certd.domains import countdown as cd
from certd.domains.verdict import Verdict
from certd.errors import LimitExceededError, UnsupportedError

__all__ = ["Checker", "Checkers", "CountdownChecker", "DomainTask"]

DomainTask = cd.CountdownTask


class Checker(Protocol):
    """What the authority needs from a domain."""

    @property
    def domain(self) -> str:
        """The domain name, e.g. ``countdown``."""
        ...

    @property
    def kappa(self) -> str:
        """The default κ name@version of the domain."""
        ...

    @property
    def verifier(self) -> str:
        """The verifier name@version."""
        ...

    def verify(self, task: DomainTask, response: str, *, canonical: bool = False) -> Verdict:
        """Check one response; never raises for any response text.

        ``canonical`` asks for the answer's canonical form (the gate needs it).
        """
        ...

    def enumerate(self, task: DomainTask) -> cd.Enumeration:
        """Every feasible label with a witness, and the families (where enumerable)."""
        ...


@dataclass(frozen=True)
class CountdownChecker:
    """Countdown, checked in process (pure code, bounded work)."""

    limits: cd.CountdownLimits
    shaping: cd.RewardShaping
    max_enumerate_numbers: int
    max_enumerate_solutions: int
    domain: str = "countdown"
    kappa: str = cd.KAPPA
    verifier: str = cd.VERIFIER

    def verify(self, task: DomainTask, response: str, *, canonical: bool = False) -> Verdict:
        """Check one response; see ``certd.domains.countdown.verify_countdown``."""
        return cd.verify_countdown(
            task, response, limits=self.limits, shaping=self.shaping, with_canonical=canonical
        )

    def enumerate(self, task: DomainTask) -> cd.Enumeration:
        """Enumerate feasible labels and families.

        Raises:
            LimitExceededError: more numbers than ``max_enumerate_numbers``.
        """
        if len(task.numbers) > self.max_enumerate_numbers:
            raise LimitExceededError(
                f"enumeration takes at most {self.max_enumerate_numbers} numbers, "
                f"got {len(task.numbers)}",
                field="task.countdown.numbers",
            )
        return cd.enumerate_families(task, max_solutions=self.max_enumerate_solutions)


class Checkers:
    """The checkers this server runs, by domain."""

    def __init__(self, cfg: CertdConfig) -> None:
        c = cfg.countdown
        self.countdown = CountdownChecker(
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

    def for_task(self, task: object) -> Checker:
        """The checker for a converted domain task.

        Raises:
            UnsupportedError: no checker serves this task's domain.
        """
        if isinstance(task, cd.CountdownTask):
            return self.countdown
        raise UnsupportedError(f"no checker for task type {type(task).__name__}")
