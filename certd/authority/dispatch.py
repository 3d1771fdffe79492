"""Verification across domains: each item goes to its domain's checker, results keep order.

Example::

    dispatch = VerifyDispatch(checkers, pool)
    results = dispatch.check(items, job)   # one CheckResult per item, in item order

Countdown batches go to the ``VerifyPool`` (worker processes for large batches).
Other domains check through their checker's ``verify_batch``, which isolates the work itself
(math in a killable worker pool, code in a sandbox pool). A batch that mixes domains is split by
domain, checked per domain, and put back in order. A checker that fails outright turns its
items into INFRA_ERROR verdicts, never wrong answers. The results are typed values; the
service encodes them.

``job`` (``certd.authority.jobs``) is the request the items belong to: the checkers schedule
its work fairly against other requests' and stop it when the job is cancelled.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from certd.authority.checker import Checker, Checkers
from certd.authority.jobs import Job, running
from certd.authority.verifypool import CheckItem, CheckResult, VerifyPool, infra, result_of
from certd.domains.verdict import Status, Verdict
from certd.errors import UnsupportedError

__all__ = ["NOT_SERVED_VERIFIER", "VerifyDispatch"]

NOT_SERVED_VERIFIER = "certd.dispatch@1"
"""The verifier named by the verdict of an item whose domain this certd does not serve."""


class VerifyDispatch:
    """Routes check items to their domains.

    Args:
        checkers: the domain checkers.
        pool: the Countdown worker pool.
    """

    def __init__(self, checkers: Checkers, pool: VerifyPool) -> None:
        self._checkers = checkers
        self._pool = pool

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
        if {item.domain for item in items} <= {"countdown"}:
            return self._pool.check(items)
        by_domain: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            by_domain.setdefault(item.domain, []).append(i)
        checkers: dict[str, Checker] = {}
        for domain in by_domain:
            try:
                checkers[domain] = self._checkers.for_domain(domain)
            except UnsupportedError:
                pass  # its items get a "not served here" verdict each, the rest are checked
        for checker in checkers.values():
            wait_ready = getattr(checker, "wait_ready", None)  # a domain that warms up (math)
            if wait_ready is not None:
                wait_ready()  # WarmingUpError (UNAVAILABLE) rather than INFRA_ERROR verdicts
        out: list[CheckResult | None] = [None] * len(items)
        for domain, where in by_domain.items():
            part = [items[i] for i in where]
            if domain == "countdown":
                results = self._pool.check(part)
            elif domain not in checkers:
                results = self._not_served(part, domain)
            else:
                with running(job):
                    results = _verify_batch(checkers[domain], part)
            for i, result in zip(where, results, strict=True):
                out[i] = result
        return [r for r in out if r is not None]

    def _not_served(self, items: Sequence[CheckItem], domain: str) -> list[CheckResult]:
        """INFRA_ERROR verdicts "domain not served here": this certd's setup, not the answer."""
        why = f"domain {domain!r} not served here (served: {', '.join(self._checkers.domains)})"
        verdict = Verdict(Status.INFRA_ERROR, 0.0, NOT_SERVED_VERIFIER, detail=why)
        return [result_of(item, verdict, 0.0) for item in items]


def _verify_batch(checker: Checker, items: Sequence[CheckItem]) -> list[CheckResult]:
    """One domain's items through its ``verify_batch``.

    A checker with ``verify_batch_timed`` (code, math) reports each item's own check time;
    for any other each item's ``elapsed_ms`` is the batch's wall time over its size.
    """
    pairs = [(item.task, item.response) for item in items]
    timed = getattr(checker, "verify_batch_timed", None)
    started = time.perf_counter()
    try:
        results = timed(pairs) if timed is not None else checker.verify_batch(pairs)
    except Exception as e:  # noqa: BLE001 - a checker failure is INFRA_ERROR for its items
        return infra(checker, items, f"verifier failed: {e!r:.200}")
    if len(results) != len(items):
        return infra(checker, items, f"verifier returned {len(results)} verdicts for {len(items)}")
    if timed is not None:
        return [result_of(item, v, ms) for item, (v, ms) in zip(items, results, strict=True)]
    each_ms = (time.perf_counter() - started) * 1e3 / max(1, len(items))
    return [result_of(item, v, each_ms) for item, v in zip(items, results, strict=True)]
