"""The math worker pool: bombs return a verdict at or before the deadline; the pool stays
healthy (same worker count, correct answers afterwards); overrunning workers and workers
that run out of memory are replaced."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from wait_helpers import wait_until

from certd.authority.mathpool import MathPool, MathWork, PoolClosedError
from certd.domains.math import MathLimits, MathTask, verify_math
from certd.domains.verdict import Status

# Run alone, after the parallel suite (make unit): its bombs must hit their deadline and
# its answers must not.
pytestmark = pytest.mark.serial

DEADLINE_S = 2.0
# Not a performance bound: a hang detector. A check must come back at its deadline plus
# the time to kill a process, far below this.
HANG_S = DEADLINE_S + 10.0

BOMBS = {
    "power tower": r"\boxed{5^{5^{5^{5^5}}}}",
    "power tower, plain": "the answer is 5^(5^(5^(5^5)))",
    "1 MB of LaTeX": "$" + r"\frac{1}{2}+" * 90_000 + "1$",
    "1 MB boxed": r"\boxed{" + "1+" * 500_000 + "1}",
    "10,000 nested braces": "\\boxed" + "{" * 10_000 + "1" + "}" * 10_000,
    "nested fractions": "\\boxed{" + "\\frac{1}{" * 30 + "2" + "}" * 30 + "}",
    "many fractions": "\\boxed{" + "+".join(["\\frac{1}{2}"] * 40) + "}",
    "huge factorial": r"\boxed{100000!}",
    "unclosed box": r"\boxed{" + "{" * 5_000,
}

# A worker's address space (VmSize in /proc/<pid>/status) is about 70 MiB once started and
# about 115 MiB at its peak after priming the grammar and running the checks in this file;
# a 256 MiB cap leaves room for every normal check.
SMALL_CAP = 256 << 20
# With max_power_digits raised to 10^10 (a deployment may raise it), 2^{2^{32}} passes the
# tree caps (1.3e9 digits), and its floor needs the exact integer: mpmath's to_int shifts 1
# left by 2^32 bits, one 512 MiB allocation, twice the cap. Without a cap the same check
# takes 1.7 GB and runs past the deadline.
OUT_OF_MEMORY = r"\boxed{\lfloor 2^{2^{32}} \rfloor}"


@pytest.fixture(scope="module")
def pool() -> Iterator[MathPool]:
    # prime=True as certd serves by default: workers fill the grammar cache between checks.
    p = MathPool(MathWork(prime=True), workers=2, deadline_s=DEADLINE_S, memory_bytes=1 << 30)
    yield p
    p.close()


@pytest.fixture(scope="module")
def small_cap_pool() -> Iterator[MathPool]:
    work = MathWork(limits=MathLimits(max_power_digits=10**10), prime=True)
    p = MathPool(work, workers=2, deadline_s=DEADLINE_S, memory_bytes=SMALL_CAP)
    yield p
    p.close()


def _healthy(pool: MathPool) -> None:
    # a replacement may be starting
    wait_until(lambda: len(pool.worker_pids()) >= pool.workers, timeout=30, what="every worker up")
    assert len(pool.worker_pids()) == pool.workers
    got = pool.verify_many([(MathTask(gold=r"\frac{1}{2}"), r"\boxed{0.5}")] * 4)
    assert [v.status for v in got] == [Status.CORRECT] * 4


@pytest.mark.parametrize("name", list(BOMBS))
def test_bomb_returns_a_verdict_and_leaves_the_pool_healthy(pool: MathPool, name: str) -> None:
    started = time.monotonic()
    v = pool.verify(MathTask(gold="3"), BOMBS[name])
    elapsed = time.monotonic() - started
    assert v.status in {Status.UNPARSED, Status.TIME_LIMIT, Status.WRONG_ANSWER}, v.detail
    assert v.status is not Status.CORRECT
    assert elapsed < HANG_S
    _healthy(pool)


def test_overrun_is_killed_and_replaced(pool: MathPool) -> None:
    before = set(pool.worker_pids())
    replaced = pool.replaced
    v = pool.verify(MathTask(gold="3"), BOMBS["nested fractions"])
    assert v.status is Status.TIME_LIMIT
    assert "killed and replaced" in v.detail and v.verifier == "math@2.0.0"
    assert pool.replaced == replaced + 1
    _healthy(pool)
    assert set(pool.worker_pids()) != before


def test_out_of_memory_answers_memory_limit_and_is_replaced(small_cap_pool: MathPool) -> None:
    pool = small_cap_pool
    _healthy(pool)  # normal checks fit under the cap
    before = set(pool.worker_pids())
    replaced = pool.replaced
    started = time.monotonic()
    v = pool.verify(MathTask(gold="3"), OUT_OF_MEMORY)
    elapsed = time.monotonic() - started
    # MEMORY_LIMIT, not TIME_LIMIT: the worker answered before the deadline.
    assert v.status is Status.MEMORY_LIMIT, v.detail
    assert v.detail == f"over the {SMALL_CAP} byte memory cap"
    assert v.reward == 0.0 and v.verifier == "math@2.0.0"
    assert elapsed < HANG_S
    assert pool.replaced == replaced + 1
    _healthy(pool)
    assert set(pool.worker_pids()) != before
    got = pool.verify_many([(MathTask(gold="3"), r"\boxed{3}")] * pool.workers)
    assert [v.status for v in got] == [Status.CORRECT] * pool.workers


def test_batch_mixes_bombs_and_answers_in_order(pool: MathPool) -> None:
    task = MathTask(gold="7")
    pairs = [(task, r"\boxed{7}"), (task, BOMBS["nested fractions"]), (task, r"\boxed{8}")]
    pairs += [(task, r"\boxed{7}")] * 5
    got = [v.status for v in pool.verify_many(pairs)]
    want = [Status.CORRECT, Status.TIME_LIMIT, Status.WRONG_ANSWER] + [Status.CORRECT] * 5
    assert got == want
    _healthy(pool)


def test_threads_share_the_pool(pool: MathPool) -> None:
    results: list[Status] = []
    lock = threading.Lock()

    def check(i: int) -> None:
        v = pool.verify(MathTask(gold=str(i)), f"\\boxed{{{i}}}")
        with lock:
            results.append(v.status)

    threads = [threading.Thread(target=check, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [Status.CORRECT] * 8


def test_idle_says_whether_a_check_is_in_flight(pool: MathPool) -> None:
    _healthy(pool)
    assert pool.idle()
    seen: list[bool] = []
    runner = threading.Thread(
        target=pool.verify, args=(MathTask(gold="3"), BOMBS["nested fractions"])
    )
    runner.start()
    deadline = time.monotonic() + HANG_S
    while runner.is_alive() and time.monotonic() < deadline:
        seen.append(pool.idle())
        time.sleep(0.05)
    runner.join()
    assert False in seen  # the 2 s check was seen in flight
    _healthy(pool)
    assert pool.idle()


def test_memory_cap_is_set_in_each_worker(pool: MathPool) -> None:
    for pid in pool.worker_pids():
        limits = open(f"/proc/{pid}/limits").read().splitlines()
        line = next(x for x in limits if x.startswith("Max address space"))
        assert line.split()[3] == str(1 << 30)


def test_closed_pool_refuses() -> None:
    p = MathPool(MathWork(), workers=1, deadline_s=1.0, memory_bytes=1 << 30)
    p.close()
    assert p.worker_pids() == []
    with pytest.raises(PoolClosedError):
        p.verify(MathTask(gold="1"), "1")


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="workers"):
        MathPool(MathWork(), workers=0, deadline_s=1.0, memory_bytes=0)


def test_priming_workers_give_the_in_process_verdicts(pool: MathPool) -> None:
    pairs = [
        (MathTask(gold=r"\frac{1}{2}"), r"\boxed{0.5}"),
        (MathTask(gold=r"(-\infty, 0) \cup (1, \infty)"), r"$x<0$ or $x>1$, \boxed{(1,\infty)}"),
        (MathTask(gold=r"x = 3"), "so the answer is 3"),
        (MathTask(gold=r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}"), r"\boxed{1}"),
        (MathTask(gold=r"1-\frac{1}{e}"), r"\boxed{1+\frac{1}{e}}"),
    ] * 3
    time.sleep(0.5)  # let the workers prime for a while between checks
    got = pool.verify_many(pairs)
    want = [verify_math(t, r) for t, r in pairs]
    assert [(v.status, v.detail) for v in got] == [(v.status, v.detail) for v in want]


def test_each_check_reports_its_own_time(pool: MathPool) -> None:
    """verify_many_timed (what VerifyBatch's per-item ``elapsed_ms`` comes from): the check
    that runs into the deadline reports about the deadline, the quick ones beside it less."""
    task = MathTask(gold="7")
    pairs = [(task, r"\boxed{7}"), (task, BOMBS["nested fractions"]), (task, r"\boxed{8}")]
    (quick, quick_ms), (bomb, bomb_ms), (wrong, wrong_ms) = pool.verify_many_timed(pairs)
    assert (quick.status, bomb.status, wrong.status) == (
        Status.CORRECT,
        Status.TIME_LIMIT,
        Status.WRONG_ANSWER,
    )
    assert bomb_ms >= DEADLINE_S * 1e3 * 0.99  # killed at the deadline, not before
    assert quick_ms < bomb_ms and wrong_ms < bomb_ms


# Issue 28's table: wrong answers that once came back CORRECT (or INFRA_ERROR) through the pool.
ISSUE_28 = [
    (r"\sin x", r"\boxed{\sin(x+e^{-1000})}"),
    ("2x+1", r"\boxed{2x+\tanh(x^{2}+1000)}"),
    ("x^2", r"\boxed{\sqrt{x^{4}+e^{-10^{4}}}}"),
    (r"\lfloor x\rfloor", r"\boxed{\lceil x\rceil-1}"),
    ("x", r"\boxed{x+\lfloor\frac{1}{1+x^{2}}\rfloor}"),
    ("3", r"The answer is \boxed{4}. % \boxed{3}"),
    ("1", r"\boxed{\lim_{x\to 0}\frac{|x|}{x}}"),
    ("1", r"\boxed{\frac{1}{1+e^{-e^{100}}}}"),
]


def test_issue_28_table_is_never_correct_nor_infra_error(pool: MathPool) -> None:
    got = pool.verify_many([(MathTask(gold=g), r) for g, r in ISSUE_28])
    for (gold, response), v in zip(ISSUE_28, got, strict=True):
        assert v.status not in (Status.CORRECT, Status.INFRA_ERROR), (gold, response, v.detail)
    _healthy(pool)
