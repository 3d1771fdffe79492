"""Domain dispatch: one checker per domain, chosen by the task's domain name.

Example:
    >>> from certd.config import CertdConfig
    >>> checkers = Checkers(CertdConfig())
    >>> checkers.for_domain("countdown").kappas
    ('countdown.first-op.v1',)
    >>> checkers.domains
    ('countdown', 'code', 'math')
    >>> checkers.close()

A domain plugs in with a checker (the ``Checker`` protocol below), a wire converter in
``certd.service.convert`` and a config section; see docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from certd.authority.code_checker import CodeChecker
from certd.authority.components import ComponentHealth
from certd.config import CertdConfig
from certd.domains import countdown as cd
from certd.domains.verdict import Verdict
from certd.errors import ConfigError, LimitExceededError, UnsupportedError

__all__ = [
    "Checker",
    "Checkers",
    "CountdownChecker",
    "DomainTask",
    "FamilyEnumeration",
    "WitnessedLabel",
]

# A converted task of some domain (CountdownTask, MathTask, CodeTask …); each checker narrows it.
DomainTask = Any


class WitnessedLabel(Protocol):
    """A feasible label under the domain's default κ and a solution that carries it."""

    @property
    def label(self) -> str:
        """The κ label string, e.g. ``25,-``."""
        ...

    @property
    def fields(self) -> dict[str, str]:
        """The label's fields by name."""
        ...

    @property
    def witness(self) -> str:
        """A response that verifies CORRECT on the task and carries the label."""
        ...


class FamilyEnumeration(Protocol):
    """A domain's enumeration of a task: feasible labels with witnesses, grouped in families."""

    @property
    def labels(self) -> Sequence[WitnessedLabel]:
        """The feasible labels."""
        ...

    @property
    def families(self) -> Sequence[Sequence[int]]:
        """Indexes into ``labels`` grouped by the pseudo-fork rule."""
        ...

    @property
    def complete(self) -> bool:
        """False when a cap cut the family computation short."""
        ...

    @property
    def certifiable(self) -> int:
        """The most families that can be certified together."""
        ...


class Checker(Protocol):
    """What the authority needs from a domain."""

    @property
    def domain(self) -> str:
        """The domain name, e.g. ``countdown``."""
        ...

    @property
    def kappa(self) -> str:
        """The default κ name@version of the domain (``Verdict.family`` is labelled by it)."""
        ...

    @property
    def kappas(self) -> tuple[str, ...]:
        """Every κ the domain labels and certifies under, the default first."""
        ...

    @property
    def verifier(self) -> str:
        """The verifier name@version."""
        ...

    def verify(self, task: DomainTask, response: str, *, canonical: bool = False) -> Verdict:
        """Check one response; never raises for any response text.

        Thread-safe: serving threads call it (Certify, unary Verify). A domain that runs
        untrusted work isolates it itself (worker pool, sandbox) under its own deadline; an
        infrastructure failure is an INFRA_ERROR verdict, never a wrong answer.
        ``canonical`` asks for the solution's canonical form (the pseudo-fork gate's key).
        """
        ...

    def verify_batch(self, pairs: Sequence[tuple[DomainTask, str]]) -> list[Verdict]:
        """Check (task, response) pairs with the domain's own parallelism; order preserved."""
        ...

    def enumerate(self, task: DomainTask) -> FamilyEnumeration:
        """Every feasible label with a witness, and the families.

        Raises:
            UnsupportedError: the domain cannot enumerate its families.
        """
        ...

    def close(self) -> None:
        """Release the checker's pools and sandboxes (server shutdown)."""
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
        if len(task.numbers) > self.max_enumerate_numbers:
            raise LimitExceededError(
                f"enumeration takes at most {self.max_enumerate_numbers} numbers, "
                f"got {len(task.numbers)}",
                field="task.countdown.numbers",
            )
        return cd.enumerate_families(task, max_solutions=self.max_enumerate_solutions)


class Checkers:
    """The checkers this server runs, by domain (the wire task's oneof name)."""

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
        self._by_domain: dict[str, Checker] = {"countdown": self.countdown}
        self._by_domain["code"] = CodeChecker(cfg.code)
        if cfg.math.enabled:
            try:
                from certd.authority.math_checker import MathChecker  # sympy: only when served
            except ModuleNotFoundError as e:  # an install without the math extra
                raise ConfigError(
                    f"math.enabled: the math domain needs the forkgate[math] extra ({e.name} is "
                    "not installed); install it or set math.enabled to false"
                ) from e
            self._by_domain["math"] = MathChecker(cfg.math)

    def components(self, *, heal: bool = False) -> list[ComponentHealth]:
        """The state of every domain's pools and models (those that report one).

        Args:
            heal: let pools replace dead idle workers first (the health monitor does).
        """
        out: list[ComponentHealth] = []
        for checker in self._by_domain.values():
            report = getattr(checker, "components", None)
            if report is not None:
                out.extend(report(heal=heal))
        return out

    def register(self, checker: Checker) -> None:
        """Serve ``checker.domain`` with ``checker`` (replacing any checker it had)."""
        self._by_domain[checker.domain] = checker

    @property
    def domains(self) -> tuple[str, ...]:
        """The domains served, in registration order."""
        return tuple(self._by_domain)

    def for_domain(self, domain: str) -> Checker:
        """The checker of a domain.

        Raises:
            UnsupportedError: no checker serves the domain here.
        """
        checker = self._by_domain.get(domain)
        if checker is None:
            raise UnsupportedError(
                f"domain {domain!r} is not served by this certd "
                f"(served: {', '.join(self._by_domain)})"
            )
        return checker

    def close(self) -> None:
        """Close every checker (their pools and sandboxes)."""
        for checker in self._by_domain.values():
            checker.close()
