"""Issue 14, reproduction 6: a cancelled request's work stops, and one batch starves nobody.

Real certd on 127.0.0.1 with a real sandbox pool (bubblewrap and Docker) and the real math
worker pool. The RPC deadlines below are liveness bounds several times what a fair scheduler
needs, and far below what the old FIFO needed (40 sleepers x 3 s / 2 workers = 60 s); they
are not performance assertions (those are in bench/bench_fairness.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from sandbox_backends import BACKENDS, make_backend, sandbox_image
from wait_helpers import wait_until

from certd.authority.code_checker import CodeChecker
from certd.config import CertdConfig, CodeConfig, MathConfig
from certd.service.server import CertdServer
from certd.v1 import authority_pb2, authority_pb2_grpc, tasks_pb2, verifier_pb2, verifier_pb2_grpc
from sandboxes import CancelScope, CheckCancelledError, Program, WarmPool

# Run alone, after the parallel suite (make unit): it times cancellation and fair shares.
pytestmark = pytest.mark.serial

IO = tasks_pb2.Task(
    code=tasks_pb2.CodeTask(
        language="python", cases=[tasks_pb2.CodeCase(stdin="2 3\n", stdout="5\n")]
    )
)
HONEST_CODE = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
SLEEPER = "```python\nimport time\ntime.sleep(100)\n```"
MATH = tasks_pb2.Task(math=tasks_pb2.MathTask(gold="3"))
BINOM = r"\boxed{\binom{10^6}{500000}}"


def _code_server(tmp_path: Path, backend: str) -> CertdServer:
    code = CodeConfig(
        backend=backend,
        docker_image=sandbox_image(),
        pool_size=2,
        cpu_time_s=2.0,
        wall_time_s=3.0,
    )
    math = MathConfig(enabled=False)
    server = CertdServer(
        CertdConfig(data_dir=tmp_path / "d", listen="127.0.0.1:0", code=code, math=math)
    )
    server.start()
    return server


@pytest.fixture(params=BACKENDS)
def code_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CertdServer]:
    server = _code_server(tmp_path, str(request.param))
    checker = server.checkers.for_domain("code")
    assert isinstance(checker, CodeChecker)
    assert checker.pool().wait_ready(120)
    try:
        yield server
    finally:
        server.stop(grace_s=0)


def _batch(items: list[tuple[tasks_pb2.Task, str]]) -> verifier_pb2.VerifyBatchRequest:
    return verifier_pb2.VerifyBatchRequest(
        items=[
            verifier_pb2.VerifyRequest(id=f"b{i}", task=t, response=r)
            for i, (t, r) in enumerate(items)
        ]
    )


def _pool(server: CertdServer) -> WarmPool:
    checker = server.checkers.for_domain("code")
    assert isinstance(checker, CodeChecker)
    return checker.pool()


def _wait(cond: Callable[[], object], timeout_s: float = 30.0) -> bool:
    return bool(wait_until(cond, timeout=timeout_s, interval=0.1))


def test_a_cancelled_batch_stops_and_an_honest_verify_goes_through(
    code_server: CertdServer,
) -> None:
    pool = _pool(code_server)
    with grpc.insecure_channel(f"127.0.0.1:{code_server.port}") as ch:
        stub = verifier_pb2_grpc.VerifierStub(ch)
        batch = stub.VerifyBatch.future(_batch([(IO, SLEEPER)] * 40), timeout=600)
        assert _wait(lambda: pool.stats().busy == 2)  # both workers run sleepers
        time.sleep(1.0)  # the thing tested: a window in which nothing else may start
        before = pool.stats()
        batch.cancel()
        # The running sleepers' sandboxes are killed and recycled; nothing else starts.
        assert _wait(lambda: pool.stats().busy == 0 and pool.stats().waiting == 0, 15)
        after = pool.stats()
        assert after.recycled >= before.recycled + 2
        assert after.runs <= before.runs + 2
        reply = stub.Verify(
            verifier_pb2.VerifyRequest(id="honest", task=IO, response=HONEST_CODE), timeout=60
        )
    assert reply.verdict.status == tasks_pb2.CORRECT
    assert pool.stats().runs <= after.runs + 1


def test_an_honest_verify_is_not_queued_behind_a_running_batch(code_server: CertdServer) -> None:
    pool = _pool(code_server)
    with grpc.insecure_channel(f"127.0.0.1:{code_server.port}") as ch:
        stub = verifier_pb2_grpc.VerifierStub(ch)
        batch = stub.VerifyBatch.future(_batch([(IO, SLEEPER)] * 40), timeout=600)
        try:
            assert _wait(lambda: pool.stats().busy == 2)
            # FIFO would put this behind 40 x 3 s / 2 workers = 60 s of sleepers.
            reply = stub.Verify(
                verifier_pb2.VerifyRequest(id="honest", task=IO, response=HONEST_CODE), timeout=30
            )
            assert reply.verdict.status == tasks_pb2.CORRECT
            assert not batch.done()
        finally:
            batch.cancel()


def test_a_cancelled_certify_batch_stops_checking_witnesses(code_server: CertdServer) -> None:
    pool = _pool(code_server)
    label = tasks_pb2.Label(kappa="code.first-call.v1", value="x")
    items = [authority_pb2.CertifyRequest(task=IO, label=label, witness=SLEEPER)] * 20
    with grpc.insecure_channel(f"127.0.0.1:{code_server.port}") as ch:
        stub = authority_pb2_grpc.AuthorityStub(ch)
        batch = stub.CertifyBatch.future(
            authority_pb2.CertifyBatchRequest(items=items), timeout=600
        )
        assert _wait(lambda: pool.stats().busy == 1)  # witnesses are checked one by one
        runs = pool.stats().runs
        batch.cancel()
        assert _wait(lambda: pool.stats().busy == 0, 15)
        time.sleep(1.0)  # the thing tested: a window in which nothing else may start
        assert pool.stats().runs <= runs + 1  # the running one, killed; nothing after it
        assert code_server.admission.in_flight == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_pool_hands_workers_out_round_robin_by_request(backend: str) -> None:
    """One worker, a 5-run batch queued first: a single run finishes third, not sixth."""
    box = make_backend(backend)
    done: list[str] = []
    lock = threading.Lock()
    with WarmPool(box, size=1) as pool:
        assert pool.wait_ready(120)
        nap = Program(argv=("python3", "-c", "import time; time.sleep(0.3)"))

        def run(key: str) -> None:
            pool.run(nap, key=key)
            with lock:
                done.append(key)

        batch = [threading.Thread(target=run, args=("batch",)) for _ in range(5)]
        for t in batch:
            t.start()
        assert _wait(lambda: pool.stats().waiting == 4)
        single = threading.Thread(target=run, args=("single",))
        single.start()
        for t in [*batch, single]:
            t.join(60)
    box.close()
    # batch #1 was running; batch #2 had the turn; then the single request's.
    assert done.index("single") <= 2, done


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancelled_run_is_killed_and_its_worker_recycled(backend: str) -> None:
    box = make_backend(backend)
    with WarmPool(box, size=1) as pool:
        assert pool.wait_ready(120)
        scope = CancelScope()
        sleeper = Program(argv=("python3", "-c", "import time; time.sleep(100)"))
        threading.Timer(1.0, scope.cancel).start()
        started = time.monotonic()
        with pytest.raises(CheckCancelledError):
            pool.run(sleeper, key="r", cancel=scope)
        assert time.monotonic() - started < 30  # killed, not run to the 4 s wall limit + grace
        with pytest.raises(CheckCancelledError):  # a cancelled request starts nothing more
            pool.run(sleeper, key="r", cancel=scope)
        assert pool.stats().recycled == 1
        r = pool.run(Program(argv=("python3", "-c", "print(7)")))
        assert r.stdout == b"7\n"
    box.close()


@pytest.fixture()
def math_server(tmp_path: Path) -> Iterator[CertdServer]:
    math = MathConfig(workers=2, deadline_s=2.0, first_step=False, prime_grammar=False)
    server = CertdServer(CertdConfig(data_dir=tmp_path / "d", listen="127.0.0.1:0", math=math))
    server.start()
    try:
        yield server
    finally:
        server.stop(grace_s=0)


def test_a_binomial_batch_does_not_hold_the_math_pool(math_server: CertdServer) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{math_server.port}") as ch:
        stub = verifier_pb2_grpc.VerifierStub(ch)
        honest = verifier_pb2.VerifyRequest(id="m", task=MATH, response=r"\boxed{3}")
        assert stub.Verify(honest, timeout=60).verdict.status == tasks_pb2.CORRECT  # pool up
        checker = math_server.checkers.for_domain("math")
        pool = checker._get_pool()  # type: ignore[attr-defined]  # the test reads the pool
        batch = stub.VerifyBatch.future(_batch([(MATH, BINOM)] * 30), timeout=600)
        try:
            assert _wait(lambda: not pool.idle())
            # Holding the pool would take 30 x 2 s / 2 workers = 30 s and more.
            assert stub.Verify(honest, timeout=15).verdict.status == tasks_pb2.CORRECT
            time.sleep(1.0)  # the thing tested: a window in which nothing else may start
            replaced = pool.replaced
        finally:
            batch.cancel()
        # Cancelled: its running checks are killed, the rest never start.
        assert _wait(lambda: pool.idle() and len(pool.worker_pids()) == 2, 30)
        assert pool.replaced <= replaced + 2
        assert stub.Verify(honest, timeout=15).verdict.status == tasks_pb2.CORRECT
