"""Process pools that check large verification batches on every core.

Example::

    pool = VerifyPool(checkers.for_domain("countdown"), workers=2, min_batch=256)
    results = pool.check([CheckItem("r1", task, digest, response, "countdown"), ...])
    pool.close()
    pools = VerifyPools.from_config(checkers, cfg)  # one per domain whose spec has process_pool

A domain declares a pool in its ``DomainSpec.process_pool`` (Countdown does: it is pure, bounded
code, so it runs in process for small batches); a large batch is cut
into chunks that worker processes check in parallel (the GIL keeps one process on one core).
Each result carries the verdict, its receipt digest and the time it took; the pool returns
results, never wire messages (the service encodes them). A worker that dies
(a crash, the OOM killer) fails only its chunk: those items come back as INFRA_ERROR and the
pool is rebuilt.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from certd.authority.checker import Checker, Checkers, FamilyCounts
from certd.authority.lifeline import die_with
from certd.authority.verify_items import CheckItem, CheckResult, DomainTask, check_items, infra
from certd.config import CertdConfig
from certd.domains import registry as domains
from certd.errors import LimitExceededError, UnsupportedError

__all__ = ["VerifyPool", "VerifyPools", "count_all", "count_one"]


def count_one(checker: Checker, value: DomainTask) -> FamilyCounts | None:
    """The task's counts; None when the domain cannot count it (unsupported, over a limit)."""
    try:
        return checker.count_families(value)
    except (UnsupportedError, LimitExceededError):
        return None


def count_all(checker: Checker, values: Sequence[DomainTask]) -> list[FamilyCounts | None]:
    """Each task's counts, as the authority's signed counts compute them (what a worker runs)."""
    return [count_one(checker, value) for value in values]


class VerifyPool:
    """Worker processes for large batches (``workers=0`` checks everything in process).

    Args:
        checker: the domain checker (picklable; sent to each worker with its chunk).
        workers: worker processes.
        min_batch: batches smaller than this are checked in process.
    """

    def __init__(self, checker: Checker, *, workers: int, min_batch: int) -> None:
        self._checker = checker
        self._workers = workers
        self._min_batch = min_batch
        self._pool: ProcessPoolExecutor | None = None
        if workers > 0:
            self._pool = self._start()

    @property
    def workers(self) -> int:
        """The configured number of worker processes."""
        return self._workers

    @property
    def domain(self) -> str:
        """The domain whose items this pool checks (its checker's)."""
        return self._checker.domain

    def _start(self) -> ProcessPoolExecutor:
        # forkserver: never fork a process that runs gRPC threads.
        ctx = multiprocessing.get_context("forkserver")
        pool = ProcessPoolExecutor(
            max_workers=self._workers,
            mp_context=ctx,
            initializer=die_with,  # a worker ends with certd, even after its SIGKILL
            initargs=(os.getpid(),),
        )
        for f in [pool.submit(check_items, self._checker, []) for _ in range(self._workers)]:
            f.result()  # start the workers now, not on the first request
        return pool

    def check(self, items: Sequence[CheckItem]) -> list[CheckResult]:
        """Check items, in parallel when the batch is large.

        Args:
            items: what to check.

        Returns:
            One result per item, in item order; a chunk whose worker died comes back as
            INFRA_ERROR results (and the pool is rebuilt).
        """
        pool = self._pool
        if pool is None or len(items) < self._min_batch:
            return check_items(self._checker, items)
        size = -(-len(items) // (2 * self._workers))
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        try:
            futures = [pool.submit(check_items, self._checker, c) for c in chunks]
        except BrokenProcessPool:  # a worker died since the last batch: rebuild, then retry
            pool.shutdown(wait=False, cancel_futures=True)
            pool = self._pool = self._start()
            futures = [pool.submit(check_items, self._checker, c) for c in chunks]
        out: list[CheckResult] = []
        broken = False
        for chunk, future in zip(chunks, futures, strict=True):
            try:
                out.extend(future.result())
            except BrokenProcessPool:
                broken = True
                out.extend(infra(self._checker, chunk, "a verifier worker died"))
        if broken:
            pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._start()
        return out

    def count_families(
        self, values: Sequence[DomainTask]
    ) -> Future[list[FamilyCounts | None]] | None:
        """Each task's counts (``count_one`` with this pool's checker) in a worker, for the
        authority's signed counts; None without workers or when the pool is broken or closed
        (the caller counts in process; ``check`` rebuilds the pool)."""
        pool = self._pool
        if pool is None:
            return None
        try:
            return pool.submit(count_all, self._checker, list(values))
        except (BrokenProcessPool, RuntimeError):  # RuntimeError: shut down
            return None

    def worker_pids(self) -> list[int]:
        """The worker processes' ids (for health reporting and tests)."""
        if self._pool is None:
            return []
        processes = self._pool._processes.values()  # no public accessor in concurrent.futures
        return sorted(p.pid for p in processes if p.pid is not None)

    def close(self) -> None:
        """Stop the workers."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class VerifyPools:
    """The verify pools of the domains whose spec declares one (``DomainSpec.process_pool``).

    Args:
        pools: the pools, one per domain.
    """

    def __init__(self, pools: Sequence[VerifyPool]) -> None:
        self._pools = tuple(pools)

    @classmethod
    def from_config(cls, checkers: Checkers, cfg: CertdConfig) -> VerifyPools:
        """One pool per served domain whose spec asks for one, sized by its config section."""
        pools = []
        for spec in domains.specs():
            if spec.process_pool is not None and spec.name in checkers.domains:
                workers, min_batch = spec.process_pool(spec.section(cfg))
                checker = checkers.for_domain(spec.name)
                pools.append(VerifyPool(checker, workers=workers, min_batch=min_batch))
        return cls(pools)

    def __iter__(self) -> Iterator[VerifyPool]:
        return iter(self._pools)

    @property
    def workers(self) -> int:
        """The configured worker processes of every pool."""
        return sum(p.workers for p in self._pools)

    def worker_pids(self) -> list[int]:
        """Every pool's worker processes (health and metrics)."""
        return sorted(pid for p in self._pools for pid in p.worker_pids())

    def close(self) -> None:
        """Stop every pool's workers."""
        for p in self._pools:
            p.close()
