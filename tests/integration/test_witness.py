"""Witnesses as real processes: ``certd witness`` follows a certd over gRPC and cosigns; clients
and the ratchet require a quorum; a witness refuses a forked log."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from server_helpers import LAZY_MATH, NO_POOL

from certd.config import CertdConfig
from certd.service.server import CertdServer
from certd.signing.keys import SigningKey, save_signing_key
from forkgate import CertdClient, VerificationError
from forkgate.ratchet import Ratchet, Reason
from forkgate.witness import open_witnessed, witnessed_checkpoint

ROOT = Path(__file__).resolve().parents[2]
ORIGIN = "forkgate.local/certd"
TASK = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}


def start_witness(
    tmp: Path, name: str, address: str, vkey: str, *extra: str
) -> tuple[subprocess.Popen[str], str, str]:
    key = SigningKey.generate(f"witness.test/{name}")
    save_signing_key(tmp / f"{name}.key", key)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "certd.cli", "witness", "--log", address, "--log-key", vkey,
            "--origin", ORIGIN, "--key", str(tmp / f"{name}.key"),
            "--state", str(tmp / f"{name}.state.json"), "--interval", "0.1", "--json", *extra,
        ],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout is not None
    info = json.loads(proc.stdout.readline())
    return proc, f"http://{info['address']}", str(info["cosigner_vkey"])


@pytest.fixture()
def witnesses(
    tmp_path: Path, address: str, vkey: str
) -> Iterator[list[tuple[subprocess.Popen[str], str, str]]]:
    ws = [start_witness(tmp_path, f"w{i}", address, vkey) for i in range(2)]
    try:
        yield ws
    finally:
        for proc, _, _ in ws:
            proc.terminate()
            proc.wait(timeout=30)


def wait_cosigned(url: str, size: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if json.loads(r.read())["size"] >= size:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} did not cosign size {size}")


def record(client: CertdClient, label: str, witness: str) -> dict[str, Any]:
    cert = client.certify(TASK, label, witness)
    fam = {"label": label, "witness": witness, "certificate": json_format.MessageToDict(cert)}
    return {"task": {"domain": "countdown", **TASK}, "families": [fam]}


def test_quorum_of_witnesses_for_clients_and_the_ratchet(
    address: str, vkey: str, witnesses: list[tuple[subprocess.Popen[str], str, str]]
) -> None:
    urls = [url for _, url, _ in witnesses]
    wkeys = [k for _, _, k in witnesses]
    with CertdClient(address, trusted_keys=[vkey]) as c:
        rec = record(c, "25,-", "(25-5)*4+3")
        size = c.checkpoint().size
        ratchet = Ratchet(
            [vkey],
            kappas={"countdown.first-op.v1"},
            consistency=lambda a, b: c.consistency_proof(a, b).hashes,
            witness_keys=wkeys,
            witness_quorum=2,
        )
        refused = ratchet.admit(rec)
        assert not refused.admitted
        assert refused.reasons[0][0] is Reason.UNWITNESSED_CHECKPOINT
        for url in urls:
            wait_cosigned(url, size)
        note, cp = witnessed_checkpoint(urls, [vkey], wkeys, quorum=2, origin=ORIGIN)
        assert cp.size >= size and note.count("\u2014 witness.test/") == 2
        ratchet.witness(note)
        assert ratchet.admit(rec).admitted
        with pytest.raises(VerificationError, match="at least 3"):
            open_witnessed(note, [vkey], wkeys, quorum=3)
        with pytest.raises(VerificationError):
            witnessed_checkpoint(urls[:1], [vkey], wkeys, quorum=2)
        # The witnesses follow the log as it grows.
        rec2 = record(c, "4,*", "4*(25-3)-5")
        rec2["families"] = rec["families"] + rec2["families"]  # coverage never shrinks
        size2 = c.checkpoint().size
        for url in urls:
            wait_cosigned(url, size2)
        note2, cp2 = witnessed_checkpoint(urls, [vkey], wkeys, quorum=2)
        assert cp2.size >= size2
        ratchet.witness(note2)
        assert ratchet.admit(rec2).admitted


def test_witness_refuses_a_forked_log(tmp_path: Path) -> None:
    """Two certd with one key and origin but different histories: the witness cosigns one and
    refuses the other (exit 2, ConsistencyError), keeping its state."""
    key = SigningKey.generate(ORIGIN)
    servers = []
    for name, label, witness in (("a", "25,-", "(25-5)*4+3"), ("b", "4,*", "4*(25-3)-5")):
        data = tmp_path / name
        data.mkdir()
        save_signing_key(data / "signing.key", key)
        server = CertdServer(
            CertdConfig(data_dir=data, listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL)
        )
        server.start()
        servers.append(server)
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            c.certify(TASK, label, witness)
            if name == "b":
                c.certify(TASK, "3,+", "3+4*(25-5)")  # b is longer: a "newer" forked head
    wkey = SigningKey.generate("witness.test/f")
    save_signing_key(tmp_path / "w.key", wkey)
    vkey = key.verifier().to_vkey()

    def once(server: CertdServer) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable, "-m", "certd.cli", "witness", "--once", "--json",
                "--log", f"127.0.0.1:{server.port}", "--log-key", vkey, "--origin", ORIGIN,
                "--key", str(tmp_path / "w.key"), "--state", str(tmp_path / "w.json"),
            ],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip

    try:
        first = once(servers[0])
        assert first.returncode == 0, first.stderr
        state = json.loads((tmp_path / "w.json").read_text())
        forked = once(servers[1])
        assert forked.returncode == 1, forked.stdout + forked.stderr  # refused: a fork
        err = json.loads(forked.stdout.strip().splitlines()[-1])
        assert err["error"] == "ConsistencyError" and "fork" in err["message"]
        assert json.loads((tmp_path / "w.json").read_text()) == state
    finally:
        for s in servers:
            s.stop(grace_s=1.0)
