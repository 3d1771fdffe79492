"""A split view across two addresses: the auditor's and the witness's state follow the log.

Two real certd servers share one key and one history, then each appends a different entry:
two signed roots of one log at one size. Auditing ``--server A`` and then ``--server B``
with the default state (one per log: origin and key id, not per address) fails the second;
so does a witness that cosigned A's tree and is then pointed at B (issue 31).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_helpers import LAZY_MATH, NO_POOL

from certd.cli import main as certd_main
from certd.config import CertdConfig
from certd.service.server import CertdServer
from certd.signing.keys import SigningKey, save_signing_key
from forkgate import CertdClient


def _task(target: int) -> dict[str, object]:
    return {"domain": "countdown", "task": {"numbers": [10, 2, 3], "target": target}}


def _server(data: Path) -> CertdServer:
    server = CertdServer(
        CertdConfig(data_dir=data, listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL)
    )
    server.start()
    return server


@pytest.fixture()
def split(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    a, b = tmp_path / "a", tmp_path / "b"
    first = _server(a)
    with CertdClient(f"127.0.0.1:{first.port}") as c:
        c.certify(_task(23), "10,*", "10*2+3")
    first.stop(grace_s=1)
    shutil.copytree(a, b)
    servers = [_server(a), _server(b)]
    try:
        for server, (target, witness) in zip(servers, [(15, "10+2+3"), (5, "10-2-3")], strict=True):
            with CertdClient(f"127.0.0.1:{server.port}") as c:
                c.certify(_task(target), "10,+" if "+" in witness else "10,-", witness)
        sizes = {s.ledger.checkpoint().checkpoint.size for s in servers}
        roots = {s.ledger.checkpoint().checkpoint.root_hash for s in servers}
        assert len(sizes) == 1 and len(roots) == 2  # one log, two trees at one size
        vkey = (a / "signing.pub").read_text().strip()
        yield f"127.0.0.1:{servers[0].port}", f"127.0.0.1:{servers[1].port}", vkey
    finally:
        for server in servers:
            server.stop(grace_s=1)


def test_auditing_replica_after_replica_catches_the_split_view(
    split: tuple[str, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, vkey = split
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert certd_main(["audit", "--server", a, "--trust", vkey]) == 0
    assert certd_main(["audit", "--server", a, "--trust", vkey]) == 0
    assert certd_main(["audit", "--server", b, "--trust", vkey]) == 1
    assert len(list((tmp_path / "state" / "forkgate").iterdir())) == 1  # one log, one state


def test_a_witness_of_one_log_refuses_the_other_tree_at_another_address(
    split: tuple[str, str, str], tmp_path: Path
) -> None:
    a, b, vkey = split
    key = SigningKey.generate("witness.example/w1")
    save_signing_key(tmp_path / "w.key", key)
    common = [
        "--log-key",
        vkey,
        "--origin",
        "forkgate.local/certd",
        "--key",
        str(tmp_path / "w.key"),
    ]
    state = ["--state", str(tmp_path / "w.json"), "--once"]
    assert certd_main(["witness", "--log", a, *common, *state]) == 0
    assert certd_main(["witness", "--log", b, *common, *state]) == 1
