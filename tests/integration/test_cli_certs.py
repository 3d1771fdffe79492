"""``forkgate get-cert`` and ``forkgate fork-tree`` against a real certd on 127.0.0.1.

Real gRPC, real SQLite ledger, real Ed25519 signatures; the certificate fetched by id and by
ledger index is the one ``certify`` wrote, it pipes into ``check-cert -``, and every error
(no such certificate, a wrong key, no domain, no server) is one line and a documented exit code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from certd.signing.keys import SigningKey
from forkgate.cli import main as forkgate_main

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}


def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _certify(
    address: str, vkey: str, tmp_path: Path, label: str, witness: str
) -> dict[str, object]:
    out = tmp_path / f"{label}.json"
    argv = ["certify", "--server", address, "--trust", vkey, "--task", json.dumps(TASK)]
    assert forkgate_main([*argv, "--label", label, "--witness", witness, "--out", str(out)]) == 0
    return dict(json.loads(out.read_text()))


def test_get_cert_by_id_and_index_then_check_cert(
    address: str, vkey: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert = _certify(address, vkey, tmp_path, "25,-", "(25-5)*4+3")
    capsys.readouterr()
    base = ["get-cert", "--server", address, "--trust", vkey]
    assert forkgate_main([*base, "--id", str(cert["certificateId"]), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["label"] == "25,-" and got["verified"] is True
    assert got["certificate_id"] == cert["certificateId"]
    index = str(cert.get("ledgerIndex", 0))
    fetched = tmp_path / "fetched.json"
    assert forkgate_main([*base, "--index", index, "--out", str(fetched)]) == 0
    assert json.loads(fetched.read_text())["certificateId"] == cert["certificateId"]
    assert forkgate_main(["check-cert", str(fetched), "--trust", vkey]) == 0

    # piped: get-cert --out - | check-cert -
    get = subprocess.run(
        [sys.executable, "-m", "forkgate.cli", *base, "--index", index, "--out", "-"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert get.returncode == 0, get.stderr
    check = subprocess.run(
        [sys.executable, "-m", "forkgate.cli", "check-cert", "-", "--trust", vkey],
        input=get.stdout, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert check.returncode == 0 and "certificate OK" in check.stdout, check.stderr


def test_get_cert_errors_are_one_line_with_exit_codes(
    address: str,
    vkey: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    dead_address: str,
) -> None:
    cert = _certify(address, vkey, tmp_path, "25,-", "(25-5)*4+3")
    capsys.readouterr()
    assert forkgate_main(["get-cert", "--server", address, "--id", "ab" * 32]) == 2
    assert "forkgate: error:" in _one_line(capsys.readouterr().err)
    other = SigningKey.generate("other").verifier().to_vkey()
    argv = ["get-cert", "--server", address, "--id", str(cert["certificateId"])]
    assert forkgate_main([*argv, "--trust", other]) == 1  # does not verify against this key
    assert "forkgate: error:" in _one_line(capsys.readouterr().err)
    assert forkgate_main(["get-cert", "--server", dead_address, "--index", "0"]) == 3
    _one_line(capsys.readouterr().err)


def test_fork_tree_lists_the_certified_labels(
    address: str, vkey: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _certify(address, vkey, tmp_path, "25,-", "(25-5)*4+3")
    _certify(address, vkey, tmp_path, "4,*", "4*(25-3)-5")
    capsys.readouterr()
    base = ["fork-tree", "--server", address, "--task", json.dumps(TASK), "--trust", vkey]
    assert forkgate_main([*base, "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert sorted(f["label"] for f in tree["labels"]) == ["25,-", "4,*"]
    assert tree["kappa"] == "countdown.first-op.v1" and tree["verified"] is True
    assert forkgate_main(base) == 0
    assert "2 certified labels" in capsys.readouterr().out
    # a task without a domain: one line, exit 2
    bare = ["fork-tree", "--server", address, "--task", json.dumps(TASK["task"])]
    assert forkgate_main(bare) == 2
    assert "domain: required" in _one_line(capsys.readouterr().err)
