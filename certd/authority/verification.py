"""Verification: check a batch and issue its signed receipt, in one call.

Example (see tests/integration for a running server)::

    verification = Verification(VerifyDispatch(checkers, pool), ReceiptIssuer(ledger, key, clock))
    done = verification.verify(items, job)   # done.results in item order, done.receipt durable
    for event in verification.verify_stream(items, every=64, job=job):
        ...  # a CheckResult per item at once; an IssuedReceipt after each group

The servicer validates the tasks, calls one of these once per RPC, and encodes what comes back;
the receipt binds the typed results (their digests and verifiers), never a wire message.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from certd.authority.dispatch import VerifyDispatch
from certd.authority.jobs import Job
from certd.authority.receipts import IssuedReceipt, ReceiptIssuer
from certd.authority.verify_items import CheckItem, CheckResult

__all__ = ["Verification", "Verified"]


@dataclass(frozen=True, slots=True)
class Verified:
    """A checked batch: one result per item, in item order, and the receipt over them."""

    results: list[CheckResult]
    receipt: IssuedReceipt


class Verification:
    """Checks responses and signs receipts over their verdicts.

    Args:
        dispatch: routes items to their domains' checkers.
        receipts: signs and logs receipts.
    """

    def __init__(self, dispatch: VerifyDispatch, receipts: ReceiptIssuer) -> None:
        self._dispatch = dispatch
        self._receipts = receipts

    def verify(self, items: Sequence[CheckItem], job: Job | None = None) -> Verified:
        """Check a batch and issue its receipt (durable in the ledger when this returns).

        Raises:
            WarmingUpError: a domain is still warming up after its wait.
            LedgerError: the receipt's ledger write failed.
        """
        results = self._dispatch.check(items, job)
        return Verified(results, self._issue(results))

    def verify_stream(
        self, items: Iterable[CheckItem], every: int, job: Job | None = None
    ) -> Iterator[CheckResult | IssuedReceipt]:
        """Check items one at a time: each result as soon as it is known, and a receipt after
        each group of ``every`` results and after the last (its ``paths`` follow the group's
        stream order).

        ``items`` is read lazily: what it raises (a malformed task, a quota) ends the stream
        there, after the receipts of the groups before.

        Raises:
            WarmingUpError, LedgerError: as ``verify``.
        """
        group: list[CheckResult] = []
        for item in items:
            [result] = self._dispatch.check([item], job)
            group.append(result)
            yield result
            if len(group) == every:
                yield self._issue(group)
                group = []
        if group:
            yield self._issue(group)

    def _issue(self, results: Sequence[CheckResult]) -> IssuedReceipt:
        return self._receipts.issue(
            [r.digest for r in results], [r.verdict.verifier for r in results]
        )
