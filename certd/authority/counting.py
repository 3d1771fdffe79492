"""The feasible-family counts a certificate signs (its coverage denominator), once per (task, κ).

Example::

    counts = SignedCounts(checkers)
    counts.use_pool(pool)  # optional: a CertifyBatch's new tasks are counted in its workers
    with counts.prefetch([(task, kappa), ...]):
        counts.get(task, kappa)  # FamilyCounts, or None when the domain cannot count the task

A count is the domain checker's ``count_families`` of the task. Where it runs never changes
it: a ``VerifyPool`` worker runs the same function on the same checker (pickled) as the
in-process path does. ``get`` never waits for a worker: a count the workers have not finished
(its chunk queued, running, cancelled, its worker dead, an error) is counted in process, which
raises what it raised before, and a chunk not yet started is cancelled. Counts are kept
in a bounded cache keyed by the task digest and the κ, so a certificate never carries a count
computed for another task or another κ.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Final

from certd.authority.checker import Checkers, FamilyCounts
from certd.authority.results import CheckedTask
from certd.authority.verify_items import DomainTask
from certd.authority.verifypool import VerifyPool, count_one

__all__ = ["CACHE_SIZE", "PREFETCH_CHUNK", "PREFETCH_MIN", "SignedCounts"]

CACHE_SIZE = 4096
"""(task, κ) counts kept; the oldest is dropped first."""

PREFETCH_MIN = 16
"""A batch counts its new tasks in the pool's workers when it has at least this many."""

PREFETCH_CHUNK = 8
"""Tasks per worker call (small: a chunk running when the caller reaches it is counted twice)."""

_Key = tuple[str, str]  # (task digest, κ)
_Pending = tuple["Future[list[FamilyCounts | None]]", int]  # a chunk's future, the task's place
_MISSING: Final = object()


class SignedCounts:
    """The counts of (task, κ), computed once and kept (thread-safe).

    Args:
        checkers: the domain checkers (a task's counts are its domain checker's).
        size: the most (task, κ) counts kept.
    """

    def __init__(self, checkers: Checkers, *, size: int = CACHE_SIZE) -> None:
        self._checkers = checkers
        self._size = size
        self._pools: dict[str, VerifyPool] = {}
        self._known: dict[_Key, FamilyCounts | None] = {}
        self._pending: dict[_Key, _Pending] = {}
        self._lock = threading.Lock()
        self._from_workers = 0

    @property
    def from_workers(self) -> int:
        """How many of the counts kept so far a pool worker computed."""
        return self._from_workers

    def use_pool(self, pool: VerifyPool) -> None:
        """Count a batch's new tasks of the pool's domain in its worker processes (one pool per
        domain; a later pool of the same domain replaces the earlier)."""
        self._pools[pool.domain] = pool

    def get(self, task: CheckedTask, kappa: str) -> FamilyCounts | None:
        """The counts of ``task`` (its domain checker's ``count_families``), for ``kappa``: the
        cached ones, a worker's if it has finished them, else counted now.

        Raises:
            Whatever the checker's ``count_families`` raises besides ``UnsupportedError`` and
            ``LimitExceededError`` (which give None).
        """
        key = (task.digest, kappa)
        with self._lock:
            if key in self._known:
                return self._known[key]
            pending = self._pending.pop(key, None)  # read once: not settled again
        found = _result(pending) if pending is not None else _MISSING
        if isinstance(found, FamilyCounts) or found is None:
            counts = found
            self._remember(key, counts, from_worker=True)
        else:
            counts = count_one(self._checkers.for_domain(task.domain), task.value)
            self._remember(key, counts)
        return counts

    @contextmanager
    def prefetch(self, wanted: Sequence[tuple[CheckedTask, str]]) -> Iterator[None]:
        """Count the new (task, κ) of ``wanted`` in the pool's workers while the caller goes on
        (``get`` takes what they finished); what is left unread is settled on exit."""
        keys = self._submit(wanted)
        try:
            yield
        finally:
            self._settle(keys)

    def _submit(self, wanted: Sequence[tuple[CheckedTask, str]]) -> list[_Key]:
        """Hand each pool its domain's new (task, κ); the keys handed out."""
        return [key for pool in self._pools.values() for key in self._submit_to(pool, wanted)]

    def _submit_to(self, pool: VerifyPool, wanted: Sequence[tuple[CheckedTask, str]]) -> list[_Key]:
        checker = self._checkers.for_domain(pool.domain)
        new: dict[_Key, DomainTask] = {}
        with self._lock:
            for task, kappa in wanted:
                key = (task.digest, kappa)
                if task.domain != pool.domain or kappa != checker.kappa:
                    continue  # only the domain's own κ signs counts (Authority._feasible)
                if key not in self._known and key not in self._pending:
                    new.setdefault(key, task.value)
        if len(new) < PREFETCH_MIN:
            return []
        keys, values = list(new), list(new.values())
        submitted: list[_Key] = []
        # From the end backwards: the caller counts from the start what no worker has finished
        # (cancelling those chunks) and they meet, so on a loaded machine almost nothing is
        # counted twice (only the chunks running at the meeting point).
        for at in reversed(range(0, len(keys), PREFETCH_CHUNK)):
            future = pool.count_families(values[at : at + PREFETCH_CHUNK])
            if future is None:
                break  # no worker to run it: the rest is counted in process
            chunk = keys[at : at + PREFETCH_CHUNK]
            with self._lock:
                for i, key in enumerate(chunk):
                    self._pending[key] = (future, i)
            submitted.extend(chunk)
        return submitted

    def _settle(self, keys: list[_Key]) -> None:
        """Keep the counts the workers finished for ``keys``; cancel the chunks not started."""
        with self._lock:
            left = [(key, self._pending.pop(key)) for key in keys if key in self._pending]
        for key, (future, i) in left:
            if future.done() and not future.cancelled() and future.exception() is None:
                self._remember(key, future.result()[i], from_worker=True)
            else:
                future.cancel()

    def _remember(
        self, key: _Key, counts: FamilyCounts | None, *, from_worker: bool = False
    ) -> None:
        with self._lock:
            self._from_workers += from_worker
            if key not in self._known and len(self._known) >= self._size:
                self._known.pop(next(iter(self._known)))
            self._known[key] = counts


def _result(pending: _Pending) -> object:
    """The worker's counts for one task, or ``_MISSING`` when its chunk has not completed
    (cancelled if it has not started: its tasks are counted in process)."""
    future, i = pending
    if not future.done():
        future.cancel()
        return _MISSING
    try:
        return future.result()[i]
    except Exception:  # noqa: BLE001 - a dead worker, a cancelled chunk, an error: recount here
        return _MISSING
