"""The math and sandbox pools (and the embedding model) in health checks and metrics.

A real server with its math pool started; a math worker killed with SIGKILL shows at once in
``certd_component_workers{component="math_pool",state="alive"}`` and, after the health check
runs, in the ``certd.component.math_pool`` health service (NOT_SERVING); once the replacement
is ready both recover. With every math worker dead the server's own health turns NOT_SERVING.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from test_observability import sample, scrape

from certd.config import CertdConfig, CountdownConfig, MathConfig, ObservabilityConfig
from certd.service.server import CertdServer
from forkgate import CertdClient

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
MATH = {"domain": "math", "gold": "3"}
CODE = {
    "domain": "code",
    "language": "python",
    "cases": [{"stdin": "", "stdout": "5\n"}],
    "compare": "whitespace",
}


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[CertdServer]:
    cfg = CertdConfig(
        data_dir=tmp_path / "d",
        listen="127.0.0.1:0",
        countdown=CountdownConfig(verify_workers=0),
        math=MathConfig(workers=2, warm_start=True, first_step=False),
        # The monitor runs only when the test calls it, so every step is observed.
        observability=ObservabilityConfig(metrics_listen="127.0.0.1:0", health_interval_s=3600),
    )
    s = CertdServer(cfg)
    s.start()
    with CertdClient(f"127.0.0.1:{s.port}") as c:
        c.verify(MATH, r"\boxed{3}")  # the math pool is up
    try:
        yield s
    finally:
        s.stop(grace_s=1.0)


def status(server: CertdServer, service: str) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        return int(stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status)


def math_pids(server: CertdServer) -> list[int]:
    pool = server.checkers.for_domain("math")._pool  # type: ignore[attr-defined]  # test probe
    assert pool is not None
    return list(pool.worker_pids())


def alive(server: CertdServer, component: str) -> float:
    text = scrape(server.metrics_port)
    return sample(text, "certd_component_workers", component=component, state="alive")


def test_a_killed_math_worker_shows_in_metrics_and_health(server: CertdServer) -> None:
    assert alive(server, "math_pool") == 2
    assert sample(scrape(server.metrics_port), "certd_component_up", component="math_pool") == 1
    assert status(server, "certd.component.math_pool") == SERVING
    os.kill(math_pids(server)[0], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(server, "math_pool") != 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert alive(server, "math_pool") == 1
    assert sample(scrape(server.metrics_port), "certd_component_up", component="math_pool") == 0
    assert server.monitor.check() is None  # not fatal: one worker still checks
    assert status(server, "certd.component.math_pool") == NOT_SERVING
    assert status(server, "") == SERVING  # one worker still checks
    deadline = time.monotonic() + 60  # the health check started a replacement
    while alive(server, "math_pool") != 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    server.monitor.check()
    assert status(server, "certd.component.math_pool") == SERVING
    with CertdClient(f"127.0.0.1:{server.port}") as c:
        assert c.verify(MATH, r"\boxed{3}").status == 1  # CORRECT


def test_every_math_worker_dead_turns_the_server_not_serving(server: CertdServer) -> None:
    for pid in math_pids(server):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(server, "math_pool") != 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    problem = server.monitor.check()
    assert problem is not None and "math pool: 0 of 2" in problem
    assert status(server, "") == NOT_SERVING
    assert sample(scrape(server.metrics_port), "certd_health_serving") == 0


def test_the_code_pool_is_reported_once_started(server: CertdServer) -> None:
    text = scrape(server.metrics_port)
    assert sample(text, "certd_component_workers", component="code_pool", state="alive") == 0
    with CertdClient(f"127.0.0.1:{server.port}") as c:
        c.verify_batch([(CODE, "```python\nprint(5)\n```")])
    configured = sample(
        scrape(server.metrics_port), "certd_component_workers", component="code_pool",
        state="configured",
    )  # fmt: skip
    assert configured >= 1
    deadline = time.monotonic() + 60  # the pool refills the sandbox it used
    while alive(server, "code_pool") < configured and time.monotonic() < deadline:
        time.sleep(0.1)
    server.monitor.check()
    assert status(server, "certd.component.code_pool") == SERVING
