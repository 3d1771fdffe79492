"""Issue 15 through a real certd on 127.0.0.1: warm-up readiness, then every example's verdict.

The server runs its default math config (``warm_start`` on: the pool and the embedding model
start in the background), with ``ready_wait_s`` short so that a request sent during the warm-up
comes back quickly with UNAVAILABLE naming the stage. The warm-up waits at a gate before it
starts the math pool (the rest of it is the real one), so it is still running when the first
test looks, however fast this machine warms up; the first test opens the gate, and every
other test opens it too and waits for the domain to serve, so each also runs alone.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from wait_helpers import wait_until

from certd.authority.math_checker import MathChecker
from certd.config import CertdConfig
from certd.service.server import CertdServer, domain_health
from forkgate import CertdClient, ClientSettings
from forkgate.errors import CertdUnavailableError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "math"))
from test_math_exactness import EQUAL_FORMS, ISSUE_EXAMPLES

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


WARM_GATE = threading.Event()  # the math warm-up starts its pool once this is set


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CertdServer]:
    data = tmp_path_factory.mktemp("math-exact") / "certd-data"
    cfg = CertdConfig.model_validate(
        {"data_dir": data, "listen": "127.0.0.1:0", "math": {"ready_wait_s": 0.0}}
    )
    get_pool = MathChecker._get_pool

    def gated(checker: MathChecker) -> object:
        WARM_GATE.wait()
        return get_pool(checker)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MathChecker, "_get_pool", gated)
        srv = CertdServer(cfg)
        srv.start()
        try:
            yield srv
        finally:
            WARM_GATE.set()
            srv.stop(grace_s=1.0)


@pytest.fixture()
def serving(server: CertdServer) -> CertdServer:
    """The module's server once its math domain serves (the gate opened, the warm-up done)."""
    WARM_GATE.set()
    addr = f"127.0.0.1:{server.port}"
    # under the suite's 300 s per-test timeout
    wait_until(lambda: _math_health(addr) == SERVING, timeout=280, interval=0.2, what="math ready")
    return server


def _math_health(addr: str) -> int:
    with grpc.insecure_channel(addr) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return int(
            stub.Check(
                health_pb2.HealthCheckRequest(service=domain_health("math")), timeout=5
            ).status
        )


def test_warm_up_is_visible_and_a_request_meanwhile_gets_a_clear_answer(
    server: CertdServer,
) -> None:
    addr = f"127.0.0.1:{server.port}"
    checker = server.checkers.for_domain("math")
    assert not checker.ready.is_set()  # type: ignore[attr-defined]  # held at the gate
    assert _math_health(addr) == NOT_SERVING
    once = ClientSettings(max_retries=0, timeout_s=30.0)
    with CertdClient(addr, settings=once) as c:
        # ready_wait_s 0: a request during the warm-up fails at once with its stage
        with pytest.raises(CertdUnavailableError) as e:
            c.verify({"domain": "math", "gold": "3"}, r"\boxed{3}")
    assert "warming up" in str(e.value) and "certd.v1.Verifier/math" in str(e.value)
    WARM_GATE.set()
    # under the suite's 300 s per-test timeout
    wait_until(lambda: _math_health(addr) == SERVING, timeout=280, interval=0.2, what="math ready")
    with CertdClient(addr, settings=once) as c:
        assert c.verify({"domain": "math", "gold": "3"}, r"\boxed{3}").status == 1


def test_issue_examples_through_certd(serving: CertdServer) -> None:
    server = serving
    addr = f"127.0.0.1:{server.port}"
    cases = ISSUE_EXAMPLES + EQUAL_FORMS
    items = [
        ({"domain": "math", "gold": gold}, f"The answer is $\\boxed{{{answer}}}$.")
        for gold, answer, _ in cases
    ]
    with CertdClient(addr, trusted_keys=[str(server.key.verifier().to_vkey())]) as c:
        got = c.verify_batch(items)
    wrong = [
        (gold, answer, v.status, v.detail)
        for (gold, answer, want), v in zip(cases, got, strict=True)
        if v.status != want.value
    ]
    assert not wrong, wrong
    # Each item reports its own check time, not the batch's mean repeated.
    assert len({v.elapsed_ms for v in got}) > 1


def test_declared_precision_travels_on_the_wire(serving: CertdServer) -> None:
    addr = f"127.0.0.1:{serving.port}"
    with CertdClient(addr) as c:
        exact = c.verify({"domain": "math", "gold": "1000001"}, r"\boxed{1000000.5}")
        declared = c.verify(
            {"domain": "math", "gold": "1000001", "precision_digits": 7}, r"\boxed{1000000.5}"
        )
    assert (exact.status, declared.status) == (2, 1)  # WRONG_ANSWER exact, CORRECT at 7 digits


def test_without_warm_start_math_health_is_serving_at_once(tmp_path: Path) -> None:
    cfg = CertdConfig.model_validate(
        {"data_dir": tmp_path / "d", "listen": "127.0.0.1:0", "math": {"warm_start": False}}
    )
    srv = CertdServer(cfg)
    srv.start()
    try:
        assert _math_health(f"127.0.0.1:{srv.port}") == SERVING  # starts on first use
    finally:
        srv.stop(grace_s=1.0)
