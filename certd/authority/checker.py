"""Domain dispatch: one checker per domain, chosen by the task's domain name.

Example:
    >>> from certd.config import CertdConfig
    >>> checkers = Checkers(CertdConfig())
    >>> checkers.for_domain("countdown").kappas
    ('countdown.first-op.v1',)
    >>> checkers.domains
    ('countdown', 'math', 'code')
    >>> checkers.close()

Each domain's checker comes from its ``DomainSpec`` (``certd.domains.registry``): the factory is
called with the domain's config section when the section enables it. The ``Checker`` protocol
below is everything a checker offers; ``CheckerBase`` gives the optional parts their defaults.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from certd.authority.components import ComponentHealth
from certd.authority.verify_items import CheckItem, CheckResult, DomainTask, infra, result_of
from certd.config import CertdConfig
from certd.domains import registry as domains
from certd.domains.verdict import Verdict
from certd.errors import ConfigError, UnsupportedError

__all__ = [
    "Checker",
    "CheckerBase",
    "Checkers",
    "DomainTask",
    "FamilyCounts",
    "FamilyEnumeration",
    "WitnessedLabel",
]


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


@dataclass(frozen=True, slots=True)
class FamilyCounts:
    """How many feasible labels and families a task's enumeration has (what a certificate
    signs as its ``feasible``; ``Checker.count_families``).

    Attributes:
        labels: the distinct feasible labels.
        families: the families.
        complete: False when a cap cut the family computation short.
    """

    labels: int
    families: int
    complete: bool


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

    def count_families(self, task: DomainTask) -> FamilyCounts:
        """The counts of ``enumerate(task)`` (a domain may count without the witnesses).

        Raises:
            UnsupportedError: the domain cannot enumerate its families.
        """
        ...

    def close(self) -> None:
        """Release the checker's pools and sandboxes (server shutdown)."""
        ...

    # Optional capabilities: ``CheckerBase`` gives each a default.

    @property
    def stage(self) -> str:
        """The warm-up stage ("ready…" once serving; CertdInfo shows it)."""
        ...

    @property
    def isolation(self) -> str:
        """How untrusted work is isolated ("bwrap", "docker:runsc"; "" when none runs)."""
        ...

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Block until the domain can check (a domain that warms up: math).

        Raises:
            WarmingUpError: still warming up after ``timeout_s``.
        """
        ...

    def on_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the domain is ready (at once when it is)."""
        ...

    def verify_batch_timed(
        self, pairs: Sequence[tuple[DomainTask, str]]
    ) -> list[tuple[Verdict, float]]:
        """``verify_batch`` with each item's own check time in milliseconds."""
        ...

    def check_items(self, items: Sequence[CheckItem]) -> list[CheckResult]:
        """Check items into results with their receipt digests, order preserved; a failure
        of the checker is INFRA_ERROR for its items, never a wrong answer."""
        ...

    def components(self, *, heal: bool = False) -> list[ComponentHealth]:
        """The state of the domain's pools and models (none by default)."""
        ...


class CheckerBase:
    """The defaults of a checker's optional capabilities (a checker subclasses this).

    A domain overrides what it has: math warms up (``stage``, ``wait_ready``, ``on_ready``),
    code and math time each item (``verify_batch_timed``) and report pools (``components``),
    Countdown checks large batches in worker processes (``check_items``).
    """

    domain: str
    kappa: str
    kappas: tuple[str, ...]
    verifier: str
    stage: str = "ready"
    isolation: str = ""

    def verify(self, task: DomainTask, response: str, *, canonical: bool = False) -> Verdict:
        """Check one response (every checker implements it)."""
        raise NotImplementedError

    def verify_batch(self, pairs: Sequence[tuple[DomainTask, str]]) -> list[Verdict]:
        """Check pairs in this thread, one by one."""
        return [self.verify(task, response) for task, response in pairs]

    def enumerate(self, task: DomainTask) -> FamilyEnumeration:
        """Raises UnsupportedError: a domain enumerates only when it says so."""
        raise UnsupportedError(f"the {self.domain} domain cannot enumerate its families")

    def count_families(self, task: DomainTask) -> FamilyCounts:
        """The counts of ``enumerate(task)`` (Raises: as ``enumerate``)."""
        found = self.enumerate(task)
        return FamilyCounts(
            labels=len({lw.label for lw in found.labels}),
            families=len(found.families),
            complete=bool(found.complete),
        )

    def close(self) -> None:
        """Nothing to release."""

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Ready at once."""

    def on_ready(self, callback: Callable[[], None]) -> None:
        """Ready at once: calls ``callback`` now."""
        callback()

    def verify_batch_timed(
        self, pairs: Sequence[tuple[DomainTask, str]]
    ) -> list[tuple[Verdict, float]]:
        """``verify_batch``; each item's time is the batch's wall time over its size."""
        started = time.perf_counter()
        verdicts = self.verify_batch(pairs)
        each_ms = (time.perf_counter() - started) * 1e3 / max(1, len(pairs))
        return [(v, each_ms) for v in verdicts]

    def check_items(self, items: Sequence[CheckItem]) -> list[CheckResult]:
        """``verify_batch_timed`` over the items, with their receipt digests."""
        try:
            results = self.verify_batch_timed([(item.task, item.response) for item in items])
        except Exception as e:  # noqa: BLE001 - a checker failure is INFRA_ERROR for its items
            return infra(self, items, f"verifier failed: {e!r:.200}")
        if len(results) != len(items):
            n = len(results)
            return infra(self, items, f"verifier returned {n} verdicts for {len(items)}")
        return [result_of(item, v, ms) for item, (v, ms) in zip(items, results, strict=True)]

    def components(self, *, heal: bool = False) -> list[ComponentHealth]:
        """No pools or models to report."""
        return []


class Checkers:
    """The checkers this server runs, by domain (the wire task's oneof name)."""

    def __init__(self, cfg: CertdConfig) -> None:
        self._by_domain: dict[str, Checker] = {}
        for spec in domains.specs():
            section = spec.section(cfg)
            if spec.enabled(section):
                self._by_domain[spec.name] = _factory(spec)(section)

    def components(self, *, heal: bool = False) -> list[ComponentHealth]:
        """The state of every domain's pools and models (those that report one).

        Args:
            heal: let pools replace dead idle workers first (the health monitor does).
        """
        out: list[ComponentHealth] = []
        for checker in self._by_domain.values():
            out.extend(checker.components(heal=heal))
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


def _factory(spec: domains.DomainSpec) -> Callable[[Any], Checker]:
    """The checker factory of a domain: a callable, or its ``module:attr`` entry point.

    Raises:
        ConfigError: the checker's module needs a pip extra that is not installed.
    """
    if not isinstance(spec.checker, str):
        return spec.checker
    module, _, attr = spec.checker.partition(":")
    try:
        factory: Callable[[Any], Checker] = getattr(importlib.import_module(module), attr)
    except ModuleNotFoundError as e:  # an install without the domain's extra
        if not spec.extra:
            raise
        raise ConfigError(
            f"{spec.config_section}.enabled: the {spec.name} domain needs the "
            f"forkgate[{spec.extra}] extra ({e.name} is not installed); install it or set "
            f"{spec.config_section}.enabled to false"
        ) from e
    return factory
