"""`--server HOST` dials certd's default port (50051), never gRPC's 443; a certd that cannot start
says why in one error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from certd.netaddr import DEFAULT_PORT, with_default_port
from forkgate._channel import channel_target
from forkgate.errors import SetupError
from forkgate.local import LocalCertd


@pytest.mark.parametrize(
    ("given", "dialled"),
    [
        ("localhost", f"localhost:{DEFAULT_PORT}"),
        ("certd.internal", f"certd.internal:{DEFAULT_PORT}"),
        ("10.0.0.1", f"10.0.0.1:{DEFAULT_PORT}"),
        ("::1", f"[::1]:{DEFAULT_PORT}"),
        ("[::1]", f"[::1]:{DEFAULT_PORT}"),
        ("localhost:7000", "localhost:7000"),
        ("[::1]:7000", "[::1]:7000"),
        ("unix:/run/certd.sock", "unix:/run/certd.sock"),
        ("dns:///certd.internal:7000", "dns:///certd.internal:7000"),
    ],
)
def test_a_host_without_a_port_gets_certds_default_port(given: str, dialled: str) -> None:
    assert with_default_port(given) == dialled
    assert channel_target(given) == (dialled, [])


def test_each_replica_without_a_port_gets_the_default_port() -> None:
    target, options = channel_target("10.0.0.1,10.0.0.2:7000")
    assert target == f"ipv4:10.0.0.1:{DEFAULT_PORT},10.0.0.2:7000"
    assert options == [("grpc.lb_policy_name", "round_robin")]


def test_local_certd_that_cannot_start_says_why_in_one_error(tmp_path: Path) -> None:
    """A bad config (as a missing extra: certd serve exits 2 with one line) is a SetupError
    carrying certd's own line, not ``KeyError: 'address'``."""
    config = tmp_path / "certd.json"
    config.write_text(json.dumps({"workers": 2}))  # sits at the wrong level: a usage error
    with pytest.raises(SetupError, match=r"certd serve could not start: .*'workers'"):
        LocalCertd(tmp_path / "data", config=config)
