"""Verification across domains: each item goes to its domain's checker, results keep order.

Example::

    dispatch = VerifyDispatch(checkers, *pools)
    results = dispatch.check(items, job)   # one CheckResult per item, in item order

A domain with a ``VerifyPool`` (its spec's ``process_pool``; Countdown: worker processes for large
batches) is checked there;
every other domain through its checker's ``check_items``, which isolates the work itself
(math in a killable worker pool, code in a sandbox pool). A batch that mixes domains is split by
domain, checked per domain, and put back in order. A checker that fails outright turns its
items into INFRA_ERROR verdicts, never wrong answers. The results are typed values; the
service encodes them.

``job`` (``certd.authority.jobs``) is the request the items belong to: the checkers schedule
its work fairly against other requests' and stop it when the job is cancelled.
"""

from __future__ import annotations

from collections.abc import Sequence

from certd.authority.checker import Checker, Checkers
from certd.authority.jobs import Job, running
from certd.authority.verify_items import CheckItem, CheckResult, result_of
from certd.authority.verifypool import VerifyPool
from certd.domains.verdict import Status, Verdict
from certd.errors import UnsupportedError

__all__ = ["NOT_SERVED_VERIFIER", "VerifyDispatch"]

NOT_SERVED_VERIFIER = "certd.dispatch@1"
"""The verifier named by the verdict of an item whose domain this certd does not serve."""


class VerifyDispatch:
    """Routes check items to their domains.

    Args:
        checkers: the domain checkers.
        pools: the domains' worker pools (``VerifyPools``): each domain's items go to its own.
    """

    def __init__(self, checkers: Checkers, *pools: VerifyPool) -> None:
        self._checkers = checkers
        self._pools = {pool.domain: pool for pool in pools}

    def check(self, items: Sequence[CheckItem], job: Job | None = None) -> list[CheckResult]:
        """Check items and return their results in item order.

        Args:
            items: what to check, of any domains served here.
            job: the request the items belong to (fair scheduling, cancellation).

        Raises:
            WarmingUpError: a domain is still warming up after its wait.

        Returns:
            One result per item (verdict, receipt digest, check time), in item order. An
            item of a domain this certd does not serve (math disabled, or its extra not
            installed) gets an INFRA_ERROR verdict "domain … not served here" from verifier
            ``certd.dispatch@1``; the batch's other items are checked as usual.
        """
        by_domain: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            by_domain.setdefault(item.domain, []).append(i)
        if len(by_domain) == 1 and items[0].domain in self._pools:
            return self._pools[items[0].domain].check(items)
        checkers: dict[str, Checker] = {}
        for domain in by_domain:
            try:
                checkers[domain] = self._checkers.for_domain(domain)
            except UnsupportedError:
                pass  # its items get a "not served here" verdict each, the rest are checked
        for checker in checkers.values():
            checker.wait_ready()  # WarmingUpError (UNAVAILABLE) rather than INFRA_ERROR verdicts
        out: list[CheckResult | None] = [None] * len(items)
        for domain, where in by_domain.items():
            part = [items[i] for i in where]
            if domain in self._pools:
                results = self._pools[domain].check(part)
            elif domain not in checkers:
                results = self._not_served(part, domain)
            else:
                with running(job):
                    results = checkers[domain].check_items(part)
            for i, result in zip(where, results, strict=True):
                out[i] = result
        return [r for r in out if r is not None]

    def _not_served(self, items: Sequence[CheckItem], domain: str) -> list[CheckResult]:
        """INFRA_ERROR verdicts "domain not served here": this certd's setup, not the answer."""
        why = f"domain {domain!r} not served here (served: {', '.join(self._checkers.domains)})"
        verdict = Verdict(Status.INFRA_ERROR, 0.0, NOT_SERVED_VERIFIER, detail=why)
        return [result_of(item, verdict, 0.0) for item in items]
