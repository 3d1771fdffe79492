"""Warm pools: pre-started sandboxed workers, a fresh process and work directory per check.

Example (needs bubblewrap)::

    from sandboxes import BwrapSandbox, Program
    from sandboxes.pool import WarmPool
    with WarmPool(BwrapSandbox(), size=2) as pool:
        print(pool.run(Program(argv=("python3", "-c", "print(1)"))).stdout)

Starting a sandbox per check costs a namespace set-up (bwrap) or a container (Docker); a pool
keeps ``size`` workers started. Each check still gets a new process forked by the worker's
trusted zygote, a new work directory filled from the check's own files, a clean environment,
and afterwards every process it left is killed and every writable place wiped, so nothing one
check leaves (files, processes, imported modules, environment) reaches the next. The pool is
bounded (``size`` checks at once), callers queue with backpressure (more than ``queue_limit``
waiting raises ``SandboxBusyError``), and a worker is replaced after ``max_runs`` checks or any
anomaly (it broke, timed out talking to the supervisor, or left processes behind) or a
MEMORY_LIMIT run (whatever memory the run may have pinned goes with the sandbox). The
replacement of a worker nearing ``max_runs`` starts ``min(50, max_runs // 4)`` checks early
and the old worker retires once it is ready, so no check waits for that start (a container
start is seconds under load). A replacement ready while the old worker still runs a check
stands by until that check ends and then takes its place: it is never handed to another
request meanwhile, so the pool never holds more than ``size`` workers for the reserve to
count, and the client whose worker retires finds its successor free.

Scheduling is fair across requests: ``run(..., key=request)`` waits in a ``FairQueue``, which
hands a freed worker to the keys round-robin, so a 40-check batch and a single check alternate
instead of the single one waiting for the whole batch; and while another request is active
(or was within ``_RESERVE_S``), no request takes the last free worker, so a batch of checks
that each run to their limits never makes another tenant's single check wait behind them (a
request alone still uses every worker). ``run(..., cancel=scope)`` stops with
the request: a queued check leaves the queue, a running one has its sandbox killed (the worker
is recycled) and ``CheckCancelledError`` is raised.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass
from types import TracebackType

from .base import Sandbox
from .errors import CheckCancelledError, SandboxBusyError, SandboxError
from .fair import CancelScope, FairQueue
from .limits import Limits
from .program import Program
from .result import ExecResult, ExecStatus
from .worker import Worker

__all__ = ["PoolStats", "WarmPool"]

_RESERVE_S = 2.0
"""How long after another request's last check a request still leaves one worker free."""


def _lead(max_runs: int) -> int:
    """Checks before ``max_runs`` at which a worker's replacement starts (0: at the recycle).

    50 checks of ~50 ms are a few seconds, what a container start takes on a loaded host."""
    return min(50, max_runs // 4)


@dataclass(frozen=True)
class PoolStats:
    """Counters of a pool.

    Attributes:
        size: Workers the pool keeps.
        idle: Workers ready now.
        busy: Checks running now.
        waiting: Callers queued for a worker.
        started: Workers started since the pool was made.
        recycled: Workers replaced (``max_runs`` reached or an anomaly).
        runs: Checks run.
        start_failures: Worker starts that failed.
    """

    size: int
    idle: int
    busy: int
    waiting: int
    started: int
    recycled: int
    runs: int
    start_failures: int


class WarmPool:
    """A bounded pool of pre-started workers of one backend."""

    def __init__(
        self,
        backend: Sandbox,
        *,
        size: int = 2,
        max_runs: int = 200,
        queue_limit: int = 256,
        acquire_timeout_s: float = 120.0,
    ) -> None:
        """Start ``size`` workers in the background.

        Args:
            backend: The sandbox backend (its limits are the ceiling of every check).
            size: Workers kept (and checks run at once).
            max_runs: Checks a worker runs before it is replaced (1 when ``fresh_per_run``).
            queue_limit: Callers allowed to wait for a worker; one more raises.
            acquire_timeout_s: Longest wait for a worker.

        Raises:
            ValueError: A non-positive size or max_runs, or a negative queue_limit.
        """
        if size < 1 or max_runs < 1 or queue_limit < 0:
            raise ValueError(
                f"expected size >= 1, max_runs >= 1, queue_limit >= 0, got {size}, {max_runs},"
                f" {queue_limit}"
            )
        self.backend = backend
        self.size = size
        self.max_runs = 1 if backend.fresh_per_run else max_runs
        self.queue_limit = queue_limit
        self.acquire_timeout_s = acquire_timeout_s
        self._cond = threading.Condition()
        self._idle: FairQueue[Worker] = FairQueue(reserve_s=_RESERVE_S, capacity=size)
        self._busy = 0
        self._starting = 0
        self._started = 0
        self._recycled = 0
        self._runs = 0
        self._start_failures = 0
        self._last_error = ""
        self._closed = False
        self._lead = _lead(self.max_runs)
        self._successor: set[int] = set()  # workers (by id) whose replacement has started
        self._standby: dict[int, Worker] = {}  # busy worker (by id) -> its ready replacement
        for _ in range(size):
            self._spawn()

    def _spawn(self, retire: Worker | None = None, owner: Hashable | None = None) -> None:
        """Start a worker in the background: ``retire``'s successor, or ``owner``'s replacement
        (the fair queue charges ``owner``'s group with it until it is ready)."""
        with self._cond:
            if self._closed:
                return
            self._starting += 1
        threading.Thread(
            target=self._start_one, args=(retire, owner), name="sandbox-pool-start", daemon=True
        ).start()

    def _succeed(self, old: Worker, new: Worker) -> bool:
        """Put ``new``, ``old``'s ready replacement, in its place. Called with ``_cond`` held.

        Returns:
            True when ``old`` was idle and is now out (the caller kills it). A busy ``old``
            keeps ``new`` standing by until its check ends (``_release`` swaps them); an
            ``old`` already gone (an anomaly or ``max_runs`` came first) lets ``new`` serve.
        """
        if id(old) in self._successor and not self._idle.remove(old):
            self._standby[id(old)] = new
            return False
        gone = id(old) in self._successor
        if gone:
            self._recycled += 1
            self._successor.discard(id(old))
        if not self._idle.put(new):
            new.kill()
        return gone

    def _start_one(self, retire: Worker | None, owner: Hashable | None) -> None:
        delay = 0.1
        while True:
            try:
                worker = self.backend.start_worker()
            except SandboxError as exc:
                with self._cond:
                    self._start_failures += 1
                    self._last_error = str(exc)
                    self._cond.notify_all()
                    if self._closed:
                        self._starting -= 1
                        return
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            gone = False
            with self._cond:
                self._starting -= 1
                self._started += 1
                if self._closed:
                    worker.kill()
                    return
                if retire is not None:
                    gone = self._succeed(retire, worker)
                elif not self._idle.put(worker, owner=owner):
                    worker.kill()
                    return
                self._cond.notify_all()
            if gone and retire is not None:
                retire.kill()
            return

    def wait_ready(self, timeout_s: float = 120.0) -> bool:
        """Wait until every worker has started.

        Args:
            timeout_s: The longest wait.

        Returns:
            True when ``size`` workers are idle.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._idle.idle + self._busy < self.size or self._starting:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _acquire(self, key: Hashable, cancel: CancelScope | None) -> Worker:
        if self._closed:
            raise SandboxBusyError("the pool is closed")
        try:
            worker = self._idle.get(
                key, cancel=cancel, timeout_s=self.acquire_timeout_s, limit=self.queue_limit
            )
        except SandboxBusyError as exc:
            raise SandboxBusyError(
                f"all {self.size} workers busy: {exc}" if not self._closed else "the pool is closed"
            ) from exc
        if worker is None:
            raise SandboxBusyError(self._busy_reason())
        with self._cond:
            self._busy += 1
        return worker

    def _busy_reason(self) -> str:
        why = "closed" if self._closed else f"out of workers for {self.acquire_timeout_s:g} s"
        last = f" (last start error: {self._last_error})" if self._last_error else ""
        return f"the pool is {why}{last}"

    def _release(self, worker: Worker, result: ExecResult | None, key: Hashable) -> None:
        anomalous = (
            result is None
            or worker.broken
            or result.anomaly is not None
            or result.status is ExecStatus.SANDBOX_ERROR
            or result.status is ExecStatus.MEMORY_LIMIT  # memory it may have pinned goes too
        )
        with self._cond:
            standby = self._standby.pop(id(worker), None)  # its replacement is ready
            recycle = anomalous or worker.runs >= self.max_runs or standby is not None
            self._busy -= 1
            self._runs += 1
            keep = not recycle and not self._closed
            if recycle:
                self._recycled += 1
            # A worker near max_runs has its replacement started now, while it still serves:
            # at the recycle a warm one is there (a container start is seconds under load).
            ahead = self._lead and worker.runs >= self.max_runs - self._lead
            started = id(worker) in self._successor
            early = keep and ahead and not started
            if early:
                self._successor.add(id(worker))
            if not keep:
                self._successor.discard(id(worker))
            fresh = recycle and not started  # a worker starts for this key, in its place
        self._idle.release(key, replacing=fresh and not self._closed)
        if early:
            self._spawn(retire=worker)
        if keep and self._idle.put(worker):
            return
        if fresh:
            self._spawn(owner=key)  # before the kill: a container's removal takes a while
        if standby is not None and not self._idle.put(standby):
            standby.kill()
        worker.kill()

    def run(
        self,
        program: Program,
        limits: Limits | None = None,
        *,
        key: Hashable | None = None,
        cancel: CancelScope | None = None,
    ) -> ExecResult:
        """Run one check on a warm worker, in ``key``'s turn.

        Args:
            program: What to run.
            limits: The check's limits (at most the backend's ceiling).
            key: The fairness group (one request), or ``(principal, request)`` so the reserve is
                kept between principals; None makes the call a group of its own.
            cancel: Stop when it is cancelled: leave the queue, or kill the running sandbox.

        Returns:
            The typed result.

        Raises:
            SandboxBusyError: The queue is full, no worker came in time, or the pool is closed.
            SandboxConfigError: The limits exceed the ceiling.
            CheckCancelledError: ``cancel`` was cancelled before or during the run.
        """
        lim = self.backend.check_limits(limits)
        key = object() if key is None else key
        worker = self._acquire(key, cancel)
        if cancel is not None and cancel.cancelled:  # cancelled as the worker was handed over
            with self._cond:
                self._busy -= 1
            self._idle.release(key)
            if not self._idle.put(worker):
                worker.kill()
            raise CheckCancelledError("the request was cancelled")
        result: ExecResult | None = None
        undo = cancel.on_cancel(worker.kill) if cancel is not None else None
        try:
            result = worker.run(program, lim)
            if cancel is not None and cancel.cancelled:
                raise CheckCancelledError("the request was cancelled; its sandbox was killed")
            return result
        finally:
            if undo is not None:
                undo()
            self._release(worker, result, key)

    def stats(self) -> PoolStats:
        """The pool's counters now."""
        with self._cond:
            return PoolStats(
                size=self.size,
                idle=self._idle.idle,
                busy=self._busy,
                waiting=self._idle.waiting,
                started=self._started,
                recycled=self._recycled,
                runs=self._runs,
                start_failures=self._start_failures,
            )

    def close(self) -> None:
        """Kill idle and standing-by workers; busy ones are killed as their checks finish.

        Idempotent.
        """
        with self._cond:
            self._closed = True
            standby = list(self._standby.values())  # whatever their predecessors do next
            self._standby.clear()
            self._cond.notify_all()
        for worker in [*self._idle.drain(), *standby]:
            worker.kill()

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
