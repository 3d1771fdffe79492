"""Shared fixtures: a real certd on 127.0.0.1 with a fresh data dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def certd_server(tmp_path: Path) -> Iterator[object]:
    """A CertdServer serving on a free loopback port (real gRPC, real SQLite, real keys)."""
    from certd.config import CertdConfig
    from certd.service.server import CertdServer

    cfg = CertdConfig.model_validate(
        {
            "data_dir": tmp_path / "certd-data",
            "listen": "127.0.0.1:0",
            # no background math warm-up for each test's server: math starts on first use
            # (tests/integration/test_math_exactness_service.py tests the warm-up)
            "math": {"warm_start": False},
        }
    )
    server = CertdServer(cfg)
    server.start()
    try:
        yield server
    finally:
        server.stop(grace_s=1.0)


@pytest.fixture()
def address(certd_server: object) -> str:
    return f"127.0.0.1:{certd_server.port}"  # type: ignore[attr-defined]


@pytest.fixture()
def vkey(certd_server: object) -> str:
    return str(certd_server.key.verifier().to_vkey())  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One real redis-server for the session (AOF, appendfsync always, a free loopback port).

    Tests share it under distinct key prefixes (``redis_prefix``); tests that restart or
    kill Redis start their own ``RedisProcess``.
    """
    from redis_helpers import RedisProcess

    server = RedisProcess(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def redis_prefix() -> str:
    """A key prefix no other test uses."""
    import uuid

    return f"t{uuid.uuid4().hex[:12]}"
