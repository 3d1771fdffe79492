"""What verification checks and returns, for every domain: items, results, their digests.

Example::

    item = CheckItem("r1", task, task_digest, response, "math")
    result = result_of(item, verdict, elapsed_ms)   # the verdict with its receipt digest

The dispatch, the checkers' ``check_items`` and the Countdown ``VerifyPool`` all speak these
types; the service encodes the results.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from certd.domains.verdict import Family, Status, Verdict
from certd.payloads import verdict_digest_of

__all__ = ["CheckItem", "CheckResult", "check_items", "infra", "result_of"]

# A converted task of some domain (CountdownTask, MathTask, CodeTask …); each checker narrows it.
DomainTask = Any


@dataclass(frozen=True, slots=True)
class CheckItem:
    """One response to check, with what its receipt digest binds."""

    item_id: str
    task: DomainTask
    task_sha256: str
    response: str
    domain: str

    def __reduce__(self) -> tuple[type[CheckItem], tuple[str, DomainTask, str, str, str]]:
        # Pickled as a constructor call (see ``CheckResult``): each chunk goes to a worker.
        return (CheckItem, (self.item_id, self.task, self.task_sha256, self.response, self.domain))


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A verdict, its receipt digest and the checking time in milliseconds."""

    verdict: Verdict
    digest: bytes
    elapsed_ms: float

    def __reduce__(self) -> tuple[type[CheckResult], tuple[Verdict, bytes, float]]:
        # Pickled as a constructor call (see ``Verdict.__reduce__``): worker processes send
        # their chunk's results back this way.
        return (CheckResult, (self.verdict, self.digest, self.elapsed_ms))


def _label(family: Family | None) -> dict[str, object] | None:
    if family is None:
        return None
    return {
        "fields": dict(sorted(family.fields.items())),
        "kappa": family.kappa,
        "value": family.label,
    }


def result_of(item: CheckItem, verdict: Verdict, elapsed_ms: float) -> CheckResult:
    """A verdict with its receipt digest (bound to the item's task and response)."""
    digest = verdict_digest_of(
        item_id=item.item_id,
        status=verdict.status.name,
        reward=verdict.reward,
        family=_label(verdict.family),
        initiated=_label(verdict.initiated),
        labels=[label for f in verdict.labels if (label := _label(f)) is not None],
        detail=verdict.detail,
        verifier=verdict.verifier,
        answer=verdict.answer,
        task_sha256=item.task_sha256,
        response=item.response,
    )
    return CheckResult(verdict, digest, elapsed_ms)


class _Verifies(Protocol):
    """What these helpers use of a checker (``certd.authority.checker.Checker`` has it)."""

    @property
    def verifier(self) -> str: ...

    def verify(self, task: Any, response: str) -> Verdict: ...


def check_items(checker: _Verifies, items: Sequence[CheckItem]) -> list[CheckResult]:
    """Check items in this process; a checker bug is INFRA_ERROR, never WRONG_ANSWER."""
    out = []
    for item in items:
        started = time.perf_counter()
        try:
            verdict = checker.verify(item.task, item.response)
        except Exception as e:  # noqa: BLE001 - becomes this item's INFRA_ERROR verdict
            verdict = Verdict(
                Status.INFRA_ERROR, 0.0, checker.verifier, detail=f"verifier failed: {e!r:.200}"
            )
        out.append(result_of(item, verdict, (time.perf_counter() - started) * 1e3))
    return out


def infra(checker: _Verifies, items: Sequence[CheckItem], why: str) -> list[CheckResult]:
    """INFRA_ERROR results for items the checker could not check."""
    verdict = Verdict(Status.INFRA_ERROR, 0.0, checker.verifier, detail=why)
    return [result_of(item, verdict, 0.0) for item in items]
