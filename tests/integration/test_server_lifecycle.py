"""Health, reflection, configuration and shutdown of a real server on loopback."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from server_helpers import LAZY_MATH, NO_POOL

from certd.config import CertdConfig, CountdownConfig
from certd.service.server import SERVICE_NAMES, CertdServer
from forkgate import CertdClient


def test_health_and_reflection(address: str, certd_server: CertdServer) -> None:
    with grpc.insecure_channel(address) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        for name in ("", *SERVICE_NAMES):
            reply = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        req = reflection_pb2.ServerReflectionRequest(list_services="")
        [reply] = list(stub.ServerReflectionInfo(iter([req]), timeout=5))
        listed = {s.name for s in reply.list_services_response.service}
    assert set(SERVICE_NAMES) <= listed
    assert "grpc.health.v1.Health" in listed
    certd_server.health.enter_graceful_shutdown()
    with grpc.insecure_channel(address) as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING


def test_reward_shaping_comes_from_config(tmp_path: Path) -> None:
    cfg = CertdConfig(
        data_dir=tmp_path / "d",
        listen="127.0.0.1:0",
        countdown=CountdownConfig(reward_correct=2.0, reward_wrong_answer=0.25, verify_workers=0),
        math=LAZY_MATH,
    )
    server = CertdServer(cfg)
    port = server.start()
    try:
        with CertdClient(f"127.0.0.1:{port}") as c:
            task = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
            right, wrong = c.verify_batch([(task, "(25-5)*4+3"), (task, "25+5+4+3")])
        assert (right.reward, wrong.reward) == (2.0, 0.25)
    finally:
        server.stop(grace_s=1)


def test_listen_on_a_taken_port_is_a_config_error(tmp_path: Path, address: str) -> None:
    from certd.errors import ConfigError

    server = CertdServer(
        CertdConfig(data_dir=tmp_path / "d2", listen=address, math=LAZY_MATH, countdown=NO_POOL)
    )
    try:
        with pytest.raises(ConfigError):
            server.start()
    finally:
        server.stop(grace_s=0)
