"""The command lines, run as a user runs them: real processes, real files, real gRPC."""

from __future__ import annotations

import base64
import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_helpers import LAZY_MATH_SECTION, NO_POOL_SECTION

from forkgate import CertdClient
from forkgate.local import LocalCertd


def _run(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, timeout=120, check=check
    )


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[LocalCertd]:
    """`certd serve` in its own process."""
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"math": LAZY_MATH_SECTION, "countdown": NO_POOL_SECTION}), encoding="utf-8"
    )
    certd = LocalCertd(tmp_path / "data", stderr=subprocess.PIPE, config=config)
    try:
        yield certd
    finally:
        if certd.process.poll() is None:
            certd.process.kill()
            certd.process.wait()


def test_sigterm_is_graceful_and_loses_no_certificate(served: LocalCertd, tmp_path: Path) -> None:
    proc, address, vkey, data = served.process, served.address, served.vkey, served.data_dir
    with CertdClient(address, trusted_keys=[vkey]) as c:
        cert = c.certify(
            {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}, "25,-", "(25-5)*4+3"
        )
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    state = tmp_path / "auditor.json"
    audit = _run("certd.cli", "audit", "--data-dir", str(data), "--state", str(state), "--json")
    report = json.loads(audit.stdout)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert report["ok"] and report["size"] > cert.ledger_index
    assert json.loads(state.read_text())  # the auditor now trusts this checkpoint

    db = sqlite3.connect(data / "ledger.sqlite")
    row = db.execute("SELECT data FROM entries WHERE idx = ?", (cert.ledger_index,)).fetchone()
    env = json.loads(row[0])
    payload = base64.b64decode(env["payload"]).replace(b'"label":"25,-"', b'"label":"25,+"')
    assert b'"label":"25,+"' in payload
    env["payload"] = base64.b64encode(payload).decode()
    forged = json.dumps(env, separators=(",", ":"), sort_keys=True).encode()
    db.execute("UPDATE entries SET data = ? WHERE idx = ?", (forged, cert.ledger_index))
    db.commit()
    db.close()
    audit = _run("certd.cli", "audit", "--data-dir", str(data), "--state", str(state), "--json")
    report = json.loads(audit.stdout)
    assert audit.returncode == 1
    assert not report["ok"]
    assert any(f["index"] == cert.ledger_index for f in report["faults"]), report["faults"]


def test_audit_over_grpc(served: LocalCertd, tmp_path: Path) -> None:
    address, vkey = served.address, served.vkey
    with CertdClient(address) as c:
        c.verify(
            {"domain": "countdown", "task": {"numbers": [1, 2, 3], "target": 6}},
            "<answer>1+2+3</answer>",
        )
    state = tmp_path / "s.json"
    ok = _run(
        "certd.cli", "audit", "--server", address, "--trust", vkey, "--state", str(state), "--json"
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["size"] == 1
    other = _run(
        "certd.cli",
        "keygen",
        "--name",
        "someone.else/log",
        "--out",
        str(tmp_path / "k.key"),
        "--json",
        check=True,
    )
    wrong_key = json.loads(other.stdout)["vkey"]
    bad = _run(
        "certd.cli",
        "audit",
        "--server",
        address,
        "--trust",
        wrong_key,
        "--state",
        str(tmp_path / "s2.json"),
        "--json",
    )
    assert bad.returncode == 1
    assert not json.loads(bad.stdout)["ok"]


def test_families_json_shape() -> None:
    out = _run(
        "certd.cli",
        "families",
        "countdown",
        "--numbers",
        "25,5,4,3",
        "--target",
        "83",
        "--json",
        check=True,
    )
    doc = json.loads(out.stdout)
    assert {"operand": 25, "operator": "-"}.items() <= doc["labels"][3].items()
    assert [(x["operand"], x["operator"]) for x in doc["labels"]] == [
        (3, "+"),
        (3, "-"),
        (4, "*"),
        (25, "-"),
    ]
    assert doc["families"] == [[0], [1], [2, 3]]
    bad = _run("certd.cli", "families", "countdown", "--numbers", "25,x", "--target", "83")
    assert bad.returncode == 2 and "--numbers" in bad.stderr


def test_verify_batch_file_with_bad_lines(served: LocalCertd, tmp_path: Path) -> None:
    address, vkey = served.address, served.vkey
    task = {"numbers": [25, 5, 4, 3], "target": 83}
    lines = [
        json.dumps(
            {
                "id": "a",
                "domain": "countdown",
                "task": task,
                "response": "<answer>(25-5)*4+3</answer>",
            }
        ),
        "{not json",
        json.dumps({"id": "b", "domain": "countdown", "task": {"numbers": "x"}, "response": "1"}),
        json.dumps(
            {
                "id": "c",
                "domain": "countdown",
                "task": {"numbers": [0, 2], "target": 2},
                "response": "2",
            }
        ),
        json.dumps({"id": "d", "domain": "countdown", "task": task, "response": "25+5+4+3"}),
        json.dumps({"id": "e", "domain": "countdown", "task": task}),
    ]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(lines) + "\n")
    run = _run(
        "forkgate.cli",
        "verify-batch",
        "--server",
        address,
        "--in",
        str(src),
        "--out",
        str(dst),
        "--trust",
        vkey,
    )
    assert run.returncode == 0, run.stderr
    out = [json.loads(x) for x in dst.read_text().splitlines()]
    assert [o["status"] for o in out] == [
        "CORRECT",
        "ERROR",
        "ERROR",
        "ERROR",
        "WRONG_ANSWER",
        "ERROR",
    ]
    assert [o.get("id") for o in out] == ["a", None, "b", "c", "d", "e"]
    assert [o.get("line") for o in out] == [None, 2, 3, 4, None, 6]
    assert set(out[0]) == {
        "id",
        "domain",
        "task",
        "response",
        "status",
        "initiated",
        "reward",
        "family",
        "kappa",
        "labels",
        "detail",
        "verifier",
        "elapsed_ms",
    }
    assert out[0]["kappa"] == "countdown.first-op.v1" and out[0]["labels"] == {}
    assert out[0]["family"] == "25,-" and out[0]["reward"] == 1.0
    assert out[3]["field"] == "task.countdown.numbers"
    assert "1..1000000" in out[3]["error"]


def test_certify_and_check_cert(served: LocalCertd, tmp_path: Path) -> None:
    address, data = served.address, served.data_dir
    cert = tmp_path / "cert.json"
    task = json.dumps({"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}})
    run = _run(
        "forkgate.cli",
        "certify",
        "--server",
        address,
        "--task",
        task,
        "--label",
        "4,*",
        "--witness",
        "4*(25-5)+3",
        "--out",
        str(cert),
    )
    assert run.returncode == 0, run.stderr
    pub = str(data / "signing.pub")
    ok = _run("forkgate.cli", "check-cert", str(cert), "--trust", pub, "--task", task, "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["label"] == "4,*"
    other_task = json.dumps(
        {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 84}}
    )
    wrong = _run("forkgate.cli", "check-cert", str(cert), "--trust", pub, "--task", other_task)
    assert wrong.returncode == 1
    doc = json.loads(cert.read_text())
    doc["inclusion"]["leafIndex"] = str(int(doc["inclusion"].get("leafIndex", "0")) + 1)
    cert.write_text(json.dumps(doc))
    tampered = _run("forkgate.cli", "check-cert", str(cert), "--trust", pub)
    assert tampered.returncode == 1 and "NOT verify" in tampered.stdout
    refused = _run(
        "forkgate.cli",
        "certify",
        "--server",
        address,
        "--task",
        task,
        "--label",
        "3,+",
        "--witness",
        "3+4*(25-5)",
    )
    assert refused.returncode == 1 and "PSEUDO" not in refused.stdout  # refused: exit 1
    assert "same solution" in refused.stderr
