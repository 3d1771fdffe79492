"""Observability over real gRPC: Prometheus metrics, request ids, JSON logs, health checks."""

from __future__ import annotations

import io
import json
import logging
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from server_helpers import LAZY_MATH
from wait_helpers import wait_until

from certd.config import CertdConfig, ClusterConfig, ObservabilityConfig
from certd.service.observability import JsonFormatter
from certd.service.server import CertdServer
from certd.v1 import verifier_pb2, verifier_pb2_grpc
from forkgate import CertdClient, InvalidRequestError, make_task

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return str(r.read().decode())


def sample(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if not line.startswith(name + ("{" if labels else " ")):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name} {labels}")


def test_metrics_request_ids_and_json_logs(tmp_path: Path) -> None:
    obs = ObservabilityConfig(metrics_listen="127.0.0.1:0")
    server = CertdServer(
        CertdConfig(
            data_dir=tmp_path / "d", listen="127.0.0.1:0", observability=obs, math=LAZY_MATH
        )
    )
    server.start()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logging.getLogger("certd").addHandler(handler)
    logging.getLogger("certd").setLevel(logging.INFO)
    try:
        address = f"127.0.0.1:{server.port}"
        with CertdClient(address) as c:
            c.verify_batch([(TASK, "<answer>(25-5)*4+3</answer>")] * 3)
            c.certify(TASK, "25,-", "(25-5)*4+3")
            with pytest.raises(InvalidRequestError):
                c.certify(TASK, "", "x")
        with grpc.insecure_channel(address) as ch:
            stub = verifier_pb2_grpc.VerifierStub(ch)
            req = verifier_pb2.VerifyRequest(
                task=make_task("countdown", TASK["task"]), response="1"
            )
            _, call = stub.Verify.with_call(req, metadata=(("x-request-id", "rid-42"),))
            assert dict(call.initial_metadata())["certd-request-id"] == "rid-42"
        text = scrape(server.metrics_port)
        assert sample(text, "certd_rpc_requests_total", method="VerifyBatch",
                      domain="countdown", code="OK") == 1  # fmt: skip
        assert sample(text, "certd_rpc_requests_total", method="Certify",
                      domain="countdown", code="INVALID_ARGUMENT") == 1  # fmt: skip
        assert sample(text, "certd_rpc_duration_seconds_count", method="Certify",
                      domain="countdown") == 2  # fmt: skip
        assert sample(text, "certd_ledger_size") == server.ledger.checkpoint().checkpoint.size
        assert 0 <= sample(text, "certd_ledger_checkpoint_age_seconds") < 600
        assert sample(text, "certd_ledger_pending_requests") == 0
        assert sample(text, "certd_verify_pool_workers", state="configured") == 2
        assert sample(text, "certd_verify_pool_workers", state="alive") == 2
        assert sample(text, "certd_health_serving") == 1
        assert sample(text, "certd_rpc_in_flight", method="Certify") == 0
        records = [json.loads(line) for line in stream.getvalue().splitlines()]
        refused = [r for r in records if "INVALID_ARGUMENT" in r["msg"]]
        assert refused and len(refused[0]["request_id"]) == 16
        assert refused[0]["request_id"] in refused[0]["msg"]
    finally:
        logging.getLogger("certd").removeHandler(handler)
        server.stop(grace_s=1.0)


def health_status(address: str) -> int:
    with grpc.insecure_channel(address) as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
        return int(reply.status)


def wait_status(address: str, want: int) -> None:
    wait_until(lambda: health_status(address) == want, timeout=30, what=f"health {want}")


def test_health_reflects_the_ledger_store(tmp_path: Path, redis_prefix: str) -> None:
    pytest.importorskip("redis")
    from redis_helpers import RedisProcess

    redis = RedisProcess(tmp_path / "redis").start()
    cfg = CertdConfig(
        data_dir=tmp_path / "d",
        listen="127.0.0.1:0",
        cluster=ClusterConfig(ledger_url=redis.url, redis_prefix=redis_prefix, redis_timeout_s=2),
        observability=ObservabilityConfig(health_interval_s=0.1),
        math=LAZY_MATH,
    )
    server = CertdServer(cfg)
    server.start()
    address = f"127.0.0.1:{server.port}"
    try:
        wait_status(address, health_pb2.HealthCheckResponse.SERVING)
        redis.stop()
        wait_status(address, health_pb2.HealthCheckResponse.NOT_SERVING)
        assert server.monitor.problem is not None and "store" in server.monitor.problem
        redis.start()
        wait_status(address, health_pb2.HealthCheckResponse.SERVING)
        with CertdClient(address) as c:
            assert c.certify(TASK, "25,-", "(25-5)*4+3").ledger_index == 0
    finally:
        server.stop(grace_s=1.0)
        redis.stop()
