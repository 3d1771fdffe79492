"""A retiring worker's ready replacement stands by for it instead of serving another request.

The backend here is a stub: the test must decide when each worker start finishes and when
each check ends, which no real sandbox lets it do. ``tests/integration/test_sandbox_pool.py``
runs the same pool on bwrap and Docker.
"""

from __future__ import annotations

import threading
import time
from typing import Any, cast

from sandboxes import Limits, Program, WarmPool
from sandboxes.base import Sandbox
from sandboxes.result import ExecResult, RawOutcome, classify

_WAIT_S = 10.0


class _Worker:
    def __init__(self, n: int) -> None:
        self.n = n
        self.runs = 0
        self.broken = False
        self.killed = threading.Event()

    def run(self, program: Program, limits: Limits) -> ExecResult:
        self.runs += 1
        gate = _GATES.get(program.argv[0])
        if gate is not None:
            assert gate.wait(_WAIT_S)
        anomaly = "1 leftover process(es) killed" if program.argv[0] == "block-h" else None
        raw = RawOutcome(0, None, 0.0, 0.0, 0, str(self.n).encode(), b"", anomaly=anomaly)
        return classify(raw, limits)

    def kill(self) -> None:
        self.killed.set()


_GATES: dict[str, threading.Event] = {}


class _Backend:
    """Starts workers at once for the pool's first ``free`` starts, then one per ``release``."""

    fresh_per_run = False

    def __init__(self, free: int) -> None:
        self.free = free
        self.started: list[_Worker] = []
        self.gates: list[threading.Event] = []
        self.lock = threading.Lock()

    def check_limits(self, limits: Limits | None) -> Limits:
        return limits or Limits()

    def start_worker(self) -> _Worker:
        with self.lock:
            n = len(self.gates)
            self.gates.append(threading.Event())
        if n >= self.free:
            assert self.gates[n].wait(_WAIT_S)
        w = _Worker(n)
        with self.lock:
            self.started.append(w)
        return w

    def release(self, n: int) -> None:
        _until(lambda: len(self.gates) > n)
        self.gates[n].set()
        _until(lambda: any(w.n == n for w in self.started))


def _until(cond: Any) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def _prog(name: str) -> Program:
    return Program(argv=(name,))


def test_the_successor_waits_for_its_busy_predecessor_not_for_another_request() -> None:
    """Issue 29 (bench_tenants, Docker: honest checks waited for a worker): the
    trainer's worker neared max_runs and its successor became ready while the trainer's check
    still ran; the hostile batch, whose worker was being replaced after an anomaly, took the
    successor, the old worker retired, and the trainer's next check waited for a container
    start. The successor now stands by for the worker it replaces."""
    for name in ("block-t", "block-h"):
        _GATES[name] = threading.Event()
    backend = _Backend(free=2)
    pool = WarmPool(cast(Sandbox, backend), size=2, max_runs=8, acquire_timeout_s=3.0)
    try:
        assert pool.wait_ready(_WAIT_S)
        trainer = iter(range(100))
        assert pool.run(_prog("quick"), key=("trainer", next(trainer))).ok
        hostile: list[ExecResult] = []
        h = threading.Thread(
            target=lambda: hostile.append(pool.run(_prog("block-h"), key=("hostile", 0)))
        )
        h.start()
        _until(lambda: pool.stats().busy == 1)
        mine = {pool.run(_prog("quick"), key=("trainer", next(trainer))).stdout for _ in range(5)}
        assert len(mine) == 1  # the trainer kept one worker: 6 runs, its replacement starts
        _until(lambda: len(backend.gates) == 3)
        t = threading.Thread(
            target=pool.run, args=(_prog("block-t"),), kwargs={"key": ("trainer", next(trainer))}
        )
        t.start()
        _until(lambda: pool.stats().busy == 2)
        _GATES["block-h"].set()  # the hostile check ends; it left a process: its worker goes
        h.join()
        nxt = threading.Thread(
            target=pool.run, args=(_prog("quick"),), kwargs={"key": ("hostile", 1)}
        )
        nxt.start()
        _until(lambda: pool.stats().waiting == 1)
        backend.release(2)  # the trainer's successor is ready while the trainer's check runs
        time.sleep(0.3)
        assert pool.stats().waiting == 1  # the hostile request did not take it
        _GATES["block-t"].set()
        t.join()
        # the successor serves at once (before: the pool's 3 s acquire timeout, then busy)
        r = pool.run(_prog("quick"), key=("trainer", next(trainer)))
        assert r.ok and r.stdout == b"2"
        assert pool.stats().waiting == 1  # the reserve still keeps the hostile one waiting
        backend.release(3)  # the hostile worker's replacement
        nxt.join()
        assert backend.started[0].killed.is_set() or backend.started[1].killed.is_set()
    finally:
        for g in _GATES.values():
            g.set()
        for g in backend.gates:
            g.set()
        pool.close()


def test_close_kills_a_successor_standing_by() -> None:
    """A successor standing by is in neither the idle set nor a check: ``close`` kills it
    at once, not when (or if) its predecessor is released again (a predecessor put back
    idle by a race would otherwise leave it running after the pool closed)."""
    _GATES["block-c"] = threading.Event()
    backend = _Backend(free=1)
    pool = WarmPool(cast(Sandbox, backend), size=1, max_runs=4, acquire_timeout_s=3.0)
    t: threading.Thread | None = None
    try:
        assert pool.wait_ready(_WAIT_S)
        for _ in range(3):  # the third run starts the successor (max_runs 4, lead 1)
            assert pool.run(_prog("quick")).ok
        _until(lambda: len(backend.gates) == 2)
        t = threading.Thread(target=pool.run, args=(_prog("block-c"),))
        t.start()
        _until(lambda: pool.stats().busy == 1)
        backend.release(1)  # ready while its predecessor's check runs: it stands by
        _until(lambda: pool.stats().started == 2)
        successor = backend.started[1]
        assert not successor.killed.is_set()
        pool.close()
        assert successor.killed.is_set()
        assert not backend.started[0].killed.is_set()  # still running its check
    finally:
        for g in [*_GATES.values(), *backend.gates]:
            g.set()
        if t is not None:
            t.join()
        pool.close()
    assert backend.started[0].killed.is_set()
