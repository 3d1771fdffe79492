"""FairQueue and CancelScope: round-robin hand-out by key, cancellation, bounds (no sandbox)."""

from __future__ import annotations

import threading
import time

import pytest

from sandboxes import CancelScope, CheckCancelledError, FairQueue, SandboxBusyError


def _waiter(
    q: FairQueue[str], key: str, got: list[tuple[str, str]], **kw: object
) -> threading.Thread:
    def run() -> None:
        item = q.get(key, **kw)  # type: ignore[arg-type]
        got.append((key, str(item)))

    t = threading.Thread(target=run)
    t.start()
    return t


def _until(cond: object) -> None:
    deadline = time.monotonic() + 10
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_keys_take_turns_and_each_key_is_fifo() -> None:
    q: FairQueue[str] = FairQueue()
    got: list[tuple[str, str]] = []
    threads = []
    for n in range(1, 5):  # a batch queues four waiters first, in order
        threads.append(_waiter(q, "batch", got))
        _until(lambda n=n: q.waiting == n)
    threads.append(_waiter(q, "single", got))
    _until(lambda: q.waiting == 5)
    for i in range(5):
        q.put(f"w{i}")
        _until(lambda i=i: len(got) == i + 1)
    for t in threads:
        t.join()
    assert [k for k, _ in got] == ["batch", "single", "batch", "batch", "batch"]
    assert q.waiting == 0 and q.keys_waiting() == 0


def test_an_idle_item_goes_to_a_newcomer_only_when_nobody_waits() -> None:
    q: FairQueue[str] = FairQueue()
    assert q.put("w")
    assert q.get("a") == "w"
    assert q.get("a", timeout_s=0.0) is None
    assert q.idle == 0


def test_a_cancelled_waiter_leaves_the_queue() -> None:
    q: FairQueue[str] = FairQueue()
    scope = CancelScope()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            q.get("r", cancel=scope)
        except CheckCancelledError as e:
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    _until(lambda: q.waiting == 1)
    scope.cancel()
    t.join(5)
    assert errors and q.waiting == 0
    q.put("w")
    assert q.idle == 1  # nobody took it for the cancelled waiter
    with pytest.raises(CheckCancelledError):
        q.get("r", cancel=scope)  # already cancelled: no wait at all


def test_limit_and_close() -> None:
    q: FairQueue[str] = FairQueue()
    got: list[tuple[str, str]] = []
    _waiter(q, "a", got)
    _until(lambda: q.waiting == 1)
    with pytest.raises(SandboxBusyError):
        q.get("b", limit=1)
    q.put("w")
    _until(lambda: got == [("a", "w")])
    q.put("x")
    assert q.drain() == ["x"]
    assert not q.put("y")  # closed: the caller disposes of it
    with pytest.raises(SandboxBusyError):
        q.get("c")


def test_cancel_hooks_run_once_and_can_be_removed() -> None:
    scope = CancelScope()
    ran: list[str] = []
    undo = scope.on_cancel(lambda: ran.append("a"))
    scope.on_cancel(lambda: ran.append("b"))
    undo()
    scope.cancel()
    scope.cancel()
    assert ran == ["b"]
    scope.on_cancel(lambda: ran.append("late"))  # after cancel: runs at once
    assert ran == ["b", "late"] and scope.cancelled


def test_a_key_leaves_the_last_worker_to_another_active_key() -> None:
    """Issue 29 (bench_tenants): a hostile batch cannot hold every worker while a trainer is
    active, so the trainer's next single check never waits for a check running to its limit."""
    q: FairQueue[str] = FairQueue(reserve_s=0.3)
    q.put("w1")
    q.put("w2")
    assert q.get("honest") == "w1"
    assert q.get("hostile") == "w2"
    q.release("honest")  # the trainer's check is done; its next comes a moment later
    q.put("w1")
    assert q.get("hostile", timeout_s=0.1) is None  # w1 is kept for the trainer
    assert q.get("honest", timeout_s=0.1) == "w1"
    q.release("honest")
    q.put("w1")
    time.sleep(0.35)  # the trainer has gone quiet: the batch may take every worker
    assert q.get("hostile", timeout_s=0.1) == "w1"


def test_a_key_alone_takes_every_worker_and_two_busy_keys_share() -> None:
    q: FairQueue[str] = FairQueue(reserve_s=0.3)
    for w in ("w1", "w2"):
        q.put(w)
    assert {q.get("batch"), q.get("batch")} == {"w1", "w2"}  # alone: both
    got: list[tuple[str, str]] = []
    t1 = _waiter(q, "batch", got, timeout_s=5)
    t2 = _waiter(q, "other", got, timeout_s=5)
    _until(lambda: q.waiting == 2)
    q.release("batch")
    q.put("w1")
    _until(lambda: len(got) == 1)
    assert got == [("other", "w1")]  # the batch holds w2: w1 is the other key's
    q.release("batch")
    q.put("w2")
    t1.join()
    t2.join()
    assert got[1] == ("batch", "w2")  # one each: no worker left idle while both wait


def test_no_reserve_with_a_single_worker() -> None:
    q: FairQueue[str] = FairQueue(reserve_s=5.0)
    q.put("w")
    assert q.get("a") == "w"
    q.release("a")
    q.put("w")
    assert q.get("b", timeout_s=0.1) == "w"


def test_a_newcomer_takes_the_kept_worker_at_once_beside_a_blocked_waiter() -> None:
    """Issue 29 (bench_tenants p50 100 ms beside a hostile batch): the batch's next check waits,
    kept off the last worker; a trainer's new request must get that worker now, not at the
    waiter's next poll (the queue had waiters, so the newcomer queued and nobody dispatched)."""
    q: FairQueue[str] = FairQueue(reserve_s=5.0)
    q.put("w1")
    q.put("w2")
    assert q.get("honest-1") == "w1"
    assert q.get("hostile") == "w2"
    q.release("honest-1")
    q.put("w1")
    got: list[tuple[str, str]] = []
    t = _waiter(q, "hostile", got, timeout_s=2)
    _until(lambda: q.waiting == 1)
    waits = []
    for n in range(5):  # each check of the trainer is a request of its own
        start = time.monotonic()
        assert q.get(f"honest-{n + 2}", timeout_s=1) == "w1"
        waits.append(time.monotonic() - start)
        q.release(f"honest-{n + 2}")
        q.put("w1")
    assert max(waits) < 0.03, waits
    assert got == []  # the batch still waits for its own worker
    t.join()


def test_a_worker_being_replaced_still_counts_toward_the_reserve() -> None:
    """Issue 29 (bench_tenants tail): a hostile check's worker is recycled (MEMORY_LIMIT); while
    its replacement starts, one worker is left, and the batch must not take the trainer's one."""
    q: FairQueue[str] = FairQueue(reserve_s=5.0, capacity=2)
    q.put("w1")  # w2 was killed; its replacement is starting
    assert q.get("honest") == "w1"
    q.release("honest")
    q.put("w1")
    assert q.get("hostile", timeout_s=0.15) is None  # kept for the trainer
    q.put("w2")  # the replacement is ready
    assert q.get("hostile", timeout_s=0.15) in ("w1", "w2")


def test_the_reserve_is_kept_between_groups_not_between_one_clients_requests() -> None:
    """Keys ``(principal, request)``: a client's warm-up check does not hold a worker back
    from its own next batch (bench_code), but another principal's recent check does."""
    q: FairQueue[str] = FairQueue(reserve_s=5.0, capacity=2)
    q.put("w1")
    q.put("w2")
    assert q.get(("alice", "warm-up")) == "w1"
    q.release(("alice", "warm-up"))
    q.put("w1")
    assert q.get(("alice", "batch")) is not None
    assert q.get(("alice", "batch"), timeout_s=0.1) is not None  # both workers: one client
    for w in ("w1", "w2"):
        q.release(("alice", "batch"))
        q.put(w)
    assert q.get(("bob", "one")) is not None
    q.release(("bob", "one"))
    q.put("w1")
    assert q.get(("alice", "next")) is not None
    assert q.get(("alice", "next"), timeout_s=0.1) is None  # the last is kept for bob


def test_many_requests_of_one_principal_still_leave_the_last_worker() -> None:
    """Keyed by request alone, a second hostile request counted the first one's worker as
    "left for others" and took the trainer's; grouped by principal it cannot."""
    q: FairQueue[str] = FairQueue(reserve_s=5.0, capacity=2)
    q.put("w1")
    q.put("w2")
    assert q.get(("trainer", "t1")) == "w1"
    assert q.get(("mallory", "batch-1")) == "w2"
    q.release(("trainer", "t1"))
    q.put("w1")
    assert q.get(("mallory", "batch-2"), timeout_s=0.15) is None
    assert q.get(("trainer", "t2"), timeout_s=0.15) == "w1"


def test_an_early_replacement_is_not_a_spare_for_the_batch() -> None:
    """While a retiring worker's replacement is up, three workers are present in a pool of
    two; the batch may not take two of them, or the trainer is left with the retiring one."""
    q: FairQueue[str] = FairQueue(reserve_s=5.0, capacity=2)
    for w in ("w1", "w2", "w3"):  # w1 retires once idle; w3 replaces it
        q.put(w)
    assert q.get("trainer") == "w1"
    q.release("trainer")
    q.put("w1")
    assert q.get("batch") is not None
    assert q.get("batch", timeout_s=0.15) is None


def test_a_replacement_stays_charged_to_the_tenant_whose_worker_it_replaces() -> None:
    """Issue 29 (bench/profile_tenants_waits.py, Docker: honest checks waited 237 and 268 ms
    for a worker): while the hostile batch's wrecked worker was replaced, one worker was
    present, the batch waited for it and the reserve made the trainer wait too, each blocked
    by the other. The worker being replaced now counts as the batch's own until its
    replacement arrives."""
    q: FairQueue[str] = FairQueue(reserve_s=5.0, capacity=2)
    q.put("w1")
    q.put("w2")
    assert q.get("honest") == "w1"
    assert q.get("hostile") == "w2"
    q.release("hostile", replacing=True)  # w2 left processes behind: it is replaced
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get("hostile", timeout_s=5.0)))
    t.start()
    deadline = time.monotonic() + 5.0
    while q.waiting == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    q.release("honest")
    q.put("w1")
    time.sleep(0.15)
    assert got == []  # the batch waits for its own replacement, not for the trainer's worker
    assert q.get("honest", timeout_s=1.0) == "w1"  # at once; before, None after the timeout
    q.put("w3", owner="hostile")  # the replacement is ready
    t.join()
    assert got == ["w3"]
