"""Issue 15 through a real certd on 127.0.0.1: warm-up readiness, then every example's verdict.

The server runs its default math config (``warm_start`` on: the pool and the embedding model
start in the background), with ``ready_wait_s`` short so that a request sent during the warm-up
comes back quickly with UNAVAILABLE naming the stage. The first test must run first (file
order): it watches the warm-up from the moment the server listens.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from wait_helpers import wait_until

from certd.config import CertdConfig
from certd.service.server import CertdServer, domain_health
from forkgate import CertdClient, ClientSettings
from forkgate.errors import CertdUnavailableError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "math"))
from test_math_exactness import EQUAL_FORMS, ISSUE_EXAMPLES

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CertdServer]:
    data = tmp_path_factory.mktemp("math-exact") / "certd-data"
    cfg = CertdConfig.model_validate(
        {"data_dir": data, "listen": "127.0.0.1:0", "math": {"ready_wait_s": 0.0}}
    )
    srv = CertdServer(cfg)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(grace_s=1.0)


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
    warming = not checker.ready.is_set()  # type: ignore[attr-defined]  # the math checker
    assert warming, "the math warm-up finished before the server listened: nothing to observe"
    assert _math_health(addr) == NOT_SERVING
    once = ClientSettings(max_retries=0, timeout_s=30.0)
    with CertdClient(addr, settings=once) as c:
        try:  # ready_wait_s 0: a request during the warm-up fails at once with its stage
            verdict = c.verify({"domain": "math", "gold": "3"}, r"\boxed{3}")
        except CertdUnavailableError as e:
            assert "warming up" in str(e) and "certd.v1.Verifier/math" in str(e)
        else:  # the warm-up ended between the health check and the call: a real verdict
            assert checker.ready.is_set() and verdict.status == 1  # type: ignore[attr-defined]
    # under the suite's 300 s per-test timeout
    wait_until(lambda: _math_health(addr) == SERVING, timeout=280, interval=0.2, what="math ready")
    with CertdClient(addr, settings=once) as c:
        assert c.verify({"domain": "math", "gold": "3"}, r"\boxed{3}").status == 1


def test_issue_examples_through_certd(server: CertdServer) -> None:
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


def test_declared_precision_travels_on_the_wire(server: CertdServer) -> None:
    addr = f"127.0.0.1:{server.port}"
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
