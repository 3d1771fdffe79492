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

    cfg = CertdConfig(data_dir=tmp_path / "certd-data", listen="127.0.0.1:0")
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
