"""The ledger quota on a real certd: a principal past it gets RESOURCE_EXHAUSTED, no entry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from server_helpers import LAZY_MATH_SECTION, NO_POOL_SECTION

from certd.config import CertdConfig
from certd.service.server import CertdServer
from certd.v1 import verifier_pb2_grpc
from forkgate import CertdClient
from forkgate._base import verify_requests
from forkgate.errors import ResourceExhaustedError

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[CertdServer]:
    cfg = CertdConfig.model_validate(
        {
            "data_dir": tmp_path / "certd-data",
            "listen": "127.0.0.1:0",
            "math": LAZY_MATH_SECTION,
            "countdown": NO_POOL_SECTION,
            "limits": {"ledger_entries_per_hour": 3},
        }
    )
    s = CertdServer(cfg)
    s.start()
    try:
        yield s
    finally:
        s.stop(grace_s=1.0)


def test_verify_past_the_quota_is_refused_and_writes_nothing(server: CertdServer) -> None:
    address = f"127.0.0.1:{server.port}"
    with CertdClient(address) as c:
        for _ in range(3):
            c.verify(TASK, "25*4-5*3-2")
        size = server.ledger.size()
        with pytest.raises(ResourceExhaustedError, match="ledger quota"):
            c.verify(TASK, "25*4-5*3-2")
        with pytest.raises(ResourceExhaustedError, match="ledger quota"):
            c.verify_batch([(TASK, "25*3+4+3+1")])
    assert server.ledger.size() == size  # the refused calls added no receipt
    with grpc.insecure_channel(address) as ch, pytest.raises(grpc.RpcError) as raw:
        verifier_pb2_grpc.VerifierStub(ch).Verify(verify_requests([(TASK, "1")])[0], timeout=30)
    assert raw.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
