"""A killable worker pool for math checks: a hard deadline and a memory cap per check.

Example::

    pool = MathPool(MathWork(), workers=2, deadline_s=2.0, memory_bytes=1 << 30)
    verdict = pool.verify(MathTask(gold="3"), r"\\boxed{3}")          # any thread
    verdicts = pool.verify_many([(task, text), ...])                  # in order
    pool.close()

Each worker is a process (forkserver context: never fork a process that runs gRPC threads)
that sets ``RLIMIT_AS`` to ``memory_bytes`` on itself, then serves one check at a time over
its own pipe. The parent sends a check and waits on the pipe with the deadline; a worker
that has not answered by then is killed (SIGKILL) and a replacement is started in the
background, so the caller gets ``TIME_LIMIT`` at the deadline and never waits for the
replacement. A worker that runs out of memory answers ``MEMORY_LIMIT`` and is replaced; a
worker that dies for any other reason gives ``INFRA_ERROR`` (never a wrong answer) and is
replaced. No ``signal.alarm``: the deadline is kept by the parent, from any thread.

With ``MathWork.prime`` a worker, while no check is waiting on its pipe, runs the LaTeX
grammar over ``warmup.prime_corpus()`` one answer at a time (a few ms each), filling ANTLR's
prediction cache; a check that arrives meanwhile waits for at most that one answer. It never
changes a verdict, only how soon unseen answers are read.

Workers are handed out by a ``FairQueue``: ``verify_many(pairs, key=request)`` takes one
worker per turn of the keys waiting, round-robin, so a batch of slow answers shares the pool
with a single check instead of holding it. ``cancel=scope`` stops a call: its pending checks
are dropped and its running ones killed (their workers replaced), and ``CheckCancelledError``
is raised. ``MathWork.nice`` lowers the workers' CPU priority once they are ready: a batch of
answers that run to the deadline keeps both cores busy, and a worker starting in place of a
killed one (at normal priority while it starts) and the serving threads must not queue behind
them for the CPU.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import resource
import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from certd.authority.lifeline import die_with
from certd.domains.math.extract import ExtractConfig
from certd.domains.math.limits import MathLimits
from certd.domains.math.names import VERIFIER
from certd.domains.math.route import kappa_route
from certd.domains.math.shaping import MathShaping
from certd.domains.math.task import MathTask
from certd.domains.verdict import Status, Verdict
from certd.errors import CertdError
from sandboxes.errors import CheckCancelledError, SandboxBusyError
from sandboxes.fair import CancelScope, FairQueue

__all__ = ["MathPool", "MathWork", "PoolClosedError", "preload_forkserver"]

# certd.cli: a worker started by the forkserver re-imports the main module (``certd serve``'s
# is certd.cli); with it preloaded that costs milliseconds, not a second per restart.
_PRELOAD = ["certd.cli", "certd.domains.math.preload"]


def preload_forkserver() -> None:
    """Ask that this process's forkserver start math-warm (call before any pool starts it).

    The forkserver is one per process and whoever starts it first decides its preload. When
    it starts cold (the Countdown pool started it), every math worker imports the checker
    itself: seconds per start, paid by the next request each time a worker is killed at its
    deadline and replaced.
    """
    multiprocessing.get_context("forkserver").set_forkserver_preload(_PRELOAD)


class PoolClosedError(CertdError):
    """The pool was closed."""


@dataclass(frozen=True, slots=True)
class MathWork:
    """What every worker needs to check a response (picklable settings)."""

    limits: MathLimits = field(default_factory=MathLimits)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    shaping: MathShaping = field(default_factory=MathShaping)
    prime: bool = False  # prime the grammar in idle time (see the module notes)
    nice: int = 0  # added to each worker's niceness once it is ready (see the module notes)


def _limit_memory(memory_bytes: int) -> None:
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def _worker_main(conn: Connection, work: MathWork, memory_bytes: int, owner: int) -> None:
    """A worker's loop: one (task, response) in, one verdict out, until the pipe closes."""
    die_with(owner)  # before the memory cap: the watch thread needs its stack
    # the checker (SymPy, the LaTeX grammar) loads here, not in the server: a warm forkserver
    # (``preload_forkserver``) has it imported already
    from certd.domains.math.parse import prime_grammar
    from certd.domains.math.verify import verify_math
    from certd.domains.math.warmup import prime_corpus, warm_up

    _limit_memory(memory_bytes)
    warm_up()  # parser tables and caches; cheap when forked from a warm forkserver
    if work.nice > 0:
        os.nice(work.nice)  # runaway checks yield the CPU to serving and to starting workers
    conn.send(("ready", os.getpid()))
    priming = prime_corpus()[::-1] if work.prime else []
    while True:
        try:
            while priming and not conn.poll(0):
                text = priming.pop()
                try:
                    prime_grammar(text, numbers=True)
                    if "," in text:  # commas are the only difference between the readings
                        prime_grammar(text, numbers=False)
                except MemoryError:
                    priming = []  # warming is optional; checks go on under the cap
            task, response = conn.recv()
        except (EOFError, OSError):
            return
        try:
            verdict: Any = verify_math(
                task, response, limits=work.limits, extract=work.extract, shaping=work.shaping
            )
        except MemoryError:
            conn.send(("memory", None))
            return  # the heap may be unusable: the parent replaces this worker
        except (RecursionError, OverflowError) as e:  # the answer's fault: its verdict
            verdict = Verdict(
                Status.UNPARSED,
                work.shaping.unparsed,
                VERIFIER,
                family=kappa_route(response),
                detail=f"the answer raised {type(e).__name__}",
            )
        except Exception as e:  # noqa: BLE001 - a checker bug becomes INFRA_ERROR, never wrong
            why = f"checker failed: {e!r:.200}"
            verdict = Verdict(Status.INFRA_ERROR, 0.0, VERIFIER, detail=why)
        conn.send(("ok", verdict))


@dataclass
class _Worker:
    proc: Any
    conn: Connection
    pid: int


class MathPool:
    """Worker processes with a hard deadline and a memory cap per check.

    Args:
        work: the settings every worker checks with.
        workers: number of worker processes (at least 1).
        deadline_s: wall-clock limit of one check inside a worker.
        memory_bytes: address-space cap of each worker (``RLIMIT_AS``; 0 for none).
        start_timeout_s: how long a starting worker may take to report ready.

    Raises:
        ValueError: fewer than one worker or a non-positive deadline.
    """

    def __init__(
        self,
        work: MathWork,
        *,
        workers: int,
        deadline_s: float,
        memory_bytes: int,
        start_timeout_s: float = 60.0,
    ) -> None:
        if workers < 1 or deadline_s <= 0:
            raise ValueError(f"need workers >= 1 and deadline_s > 0, got {workers}, {deadline_s}")
        self.work = work
        self.workers = workers
        self.deadline_s = deadline_s
        self.memory_bytes = memory_bytes
        self.start_timeout_s = start_timeout_s
        self._ctx = multiprocessing.get_context("forkserver")
        preload_forkserver()  # no effect once a forkserver runs
        self._idle: FairQueue[_Worker] = FairQueue()
        self._lock = threading.Lock()
        self._all: dict[int, _Worker] = {}
        self._closed = False
        self.replaced = 0
        starting = [self._start() for _ in range(workers)]
        for w in starting:
            self._await_ready(w)

    # -- workers -------------------------------------------------------------------------

    def _start(self) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=_worker_main,
            args=(child, self.work, self.memory_bytes, os.getpid()),
            daemon=True,
        )
        proc.start()
        child.close()
        return _Worker(proc, parent, proc.pid or 0)

    def _await_ready(self, w: _Worker) -> None:
        if not w.conn.poll(self.start_timeout_s):
            self._kill(w)
            raise RuntimeError(f"a math worker did not start within {self.start_timeout_s}s")
        w.conn.recv()
        with self._lock:
            if self._closed:
                self._kill(w)
                return
            self._all[w.pid] = w
        if not self._idle.put(w):
            self._kill(w)

    def _kill(self, w: _Worker) -> None:
        with self._lock:
            self._all.pop(w.pid, None)
        try:
            w.proc.kill()
        except (OSError, ValueError):
            pass
        w.proc.join(timeout=5.0)
        w.conn.close()

    def _replace(self, w: _Worker) -> None:
        """Kill a worker now; start its replacement in the background."""
        self._kill(w)
        self.replaced += 1

        def start() -> None:
            for _ in range(3):
                if self._closed:
                    return
                try:
                    self._await_ready(self._start())
                    return
                except (RuntimeError, OSError, EOFError):
                    time.sleep(0.5)

        threading.Thread(target=start, name="math-worker-start", daemon=True).start()

    def _take(self, key: Hashable, cancel: CancelScope | None, block: bool) -> _Worker | None:
        """A live worker in ``key``'s turn; None when ``block`` is false and none is free now."""
        while True:
            if self._closed:
                raise PoolClosedError("the math pool is closed")
            try:
                w = self._idle.get(key, cancel=cancel, timeout_s=0.5 if block else 0.0)
            except SandboxBusyError as e:
                raise PoolClosedError("the math pool is closed") from e
            if w is None:
                if not block:
                    return None
                continue
            if w.proc.is_alive():
                return w
            self._replace(w)

    # -- checks --------------------------------------------------------------------------

    def _timeout(self, response: str) -> Verdict:
        return Verdict(
            Status.TIME_LIMIT,
            self.work.shaping.unparsed,
            VERIFIER,
            family=kappa_route(response[: self.work.limits.max_response_chars]),
            detail=f"over the {self.deadline_s:g}s deadline; the worker was killed and replaced",
        )

    def _finish(self, w: _Worker, response: str) -> Verdict:
        """Read a ready worker's answer; return it to the pool or replace it."""
        try:
            kind, payload = w.conn.recv()
        except (EOFError, OSError):
            code = w.proc.exitcode
            self._replace(w)
            return Verdict(
                Status.INFRA_ERROR, 0.0, VERIFIER, detail=f"a math worker died (exit {code})"
            )
        if kind == "memory":
            self._replace(w)
            return Verdict(
                Status.MEMORY_LIMIT,
                self.work.shaping.unparsed,
                VERIFIER,
                family=kappa_route(response[: self.work.limits.max_response_chars]),
                detail=f"over the {self.memory_bytes} byte memory cap",
            )
        if not self._idle.put(w):
            self._kill(w)
        verdict: Verdict = payload
        return verdict

    def _send(self, w: _Worker, task: MathTask, response: str) -> bool:
        try:
            w.conn.send((task, response))
            return True
        except (OSError, ValueError):
            self._replace(w)
            return False

    def verify(self, task: MathTask, response: str) -> Verdict:
        """Check one response within the deadline (thread-safe).

        Raises:
            PoolClosedError: the pool was closed.

        Returns:
            The verdict; TIME_LIMIT when the worker ran past the deadline.
        """
        return self.verify_many([(task, response)])[0]

    def verify_many(
        self,
        pairs: Sequence[tuple[MathTask, str]],
        *,
        key: Hashable | None = None,
        cancel: CancelScope | None = None,
    ) -> list[Verdict]:
        """``verify_many_timed`` without the times."""
        return [v for v, _ in self.verify_many_timed(pairs, key=key, cancel=cancel)]

    def verify_many_timed(
        self,
        pairs: Sequence[tuple[MathTask, str]],
        *,
        key: Hashable | None = None,
        cancel: CancelScope | None = None,
    ) -> list[tuple[Verdict, float]]:
        """Check many responses, one worker per turn of ``key``, each with its deadline.

        Args:
            pairs: (task, response) pairs.
            key: The fairness group (one request); None makes the call a group of its own.
            cancel: Stop when it is cancelled: drop pending checks, kill running ones.

        Raises:
            PoolClosedError: the pool was closed.
            CheckCancelledError: ``cancel`` was cancelled.

        Returns:
            One (verdict, milliseconds from sending it to a worker to its answer) per pair,
            in order.
        """
        key = object() if key is None else key
        results: list[tuple[Verdict, float] | None] = [None] * len(pairs)
        pending = collections.deque(range(len(pairs)))
        busy: dict[Connection, tuple[_Worker, int, float]] = {}
        try:
            while pending or busy:
                self._dispatch(pairs, pending, busy, key, cancel)
                if busy:
                    self._collect(pairs, results, busy, poll_s=0.1)  # also picks up freed workers
                if cancel is not None and cancel.cancelled:
                    raise CheckCancelledError("the request was cancelled")
        except BaseException:
            for w, _, _ in busy.values():  # cancelled or failed: nothing may keep running
                self._replace(w)
            raise
        return [r for r in results if r is not None]

    def alive(self) -> int:
        """Worker processes alive now (a killed one counts until it is replaced)."""
        with self._lock:
            workers = list(self._all.values())
        return sum(1 for w in workers if w.proc.is_alive())

    def heal(self) -> int:
        """Replace idle workers that died (a check would otherwise find them first).

        Returns:
            How many were found dead and are being replaced.
        """
        found = self._idle.take_idle()
        dead = 0
        for w in found:
            if w.proc.is_alive():
                if not self._idle.put(w):  # closed meanwhile
                    self._replace(w)
            else:
                dead += 1
                self._replace(w)
        return dead

    def _dispatch(
        self,
        pairs: Sequence[tuple[MathTask, str]],
        pending: collections.deque[int],
        busy: dict[Connection, tuple[_Worker, int, float]],
        key: Hashable,
        cancel: CancelScope | None,
    ) -> None:
        """Start pending checks on the workers this call can take now (one, blocking, if none)."""
        while pending:
            w = self._take(key, cancel, block=not busy)
            if w is None:
                return
            i = pending[0]
            if self._send(w, *pairs[i]):
                pending.popleft()
                busy[w.conn] = (w, i, time.monotonic() + self.deadline_s)

    def _collect(
        self,
        pairs: Sequence[tuple[MathTask, str]],
        results: list[tuple[Verdict, float] | None],
        busy: dict[Connection, tuple[_Worker, int, float]],
        poll_s: float | None,
    ) -> None:
        """Wait for the first answer or deadline; read answers, kill late workers."""
        now = time.monotonic()
        timeout = max(0.0, min(d for _, _, d in busy.values()) - now)
        if poll_s is not None:
            timeout = min(timeout, poll_s)
        for ready in wait(list(busy), timeout=timeout):
            w, i, due = busy.pop(ready)  # type: ignore[call-overload]  # one of busy's keys
            verdict = self._finish(w, pairs[i][1])
            results[i] = (verdict, (time.monotonic() - due + self.deadline_s) * 1e3)
        now = time.monotonic()
        for conn, (w, i, due) in list(busy.items()):
            if now >= due:
                del busy[conn]
                self._replace(w)
                results[i] = (self._timeout(pairs[i][1]), (now - due + self.deadline_s) * 1e3)

    def idle(self) -> bool:
        """Whether no check is in flight: every worker waits for work."""
        return self._idle.idle >= self.workers

    def worker_pids(self) -> list[int]:
        """The live workers' process ids (for health checks and tests)."""
        with self._lock:
            return sorted(self._all)

    def close(self) -> None:
        """Stop every worker."""
        with self._lock:
            self._closed = True
            workers = list(self._all.values())
        self._idle.drain()
        for w in workers:
            self._kill(w)
