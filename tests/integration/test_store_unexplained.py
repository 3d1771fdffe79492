"""A store holding rows its tree does not explain: the audit fails naming them, start-up stops.

The case from issue 16: a junk row at ``idx = tree_size`` in the SQLite store used to pass
``certd audit`` and, after a restart, made every Certify fail UNAVAILABLE ("UNIQUE
constraint failed"). Real server, real SQLite file, the real CLI.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from server_helpers import LAZY_MATH, NO_POOL

from certd.config import CertdConfig
from certd.errors import ConsistencyError
from certd.service.server import CertdServer
from forkgate import CertdClient

TASK = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}


def _certd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "certd.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _junk(data: Path, what: str) -> int:
    with sqlite3.connect(data / "ledger.sqlite") as db:
        (size,) = db.execute("SELECT value FROM meta WHERE name = 'tree_size'").fetchone()
        if what == "entry":
            db.execute("INSERT INTO entries(idx, key, data) VALUES (?, NULL, ?)", (size, b"junk"))
        else:
            db.execute("INSERT INTO checkpoints(size, note) VALUES (?, 'junk')", (size + 5,))
    return int(size)


@pytest.mark.parametrize("what", ["entry", "checkpoint"])
def test_junk_beyond_the_tree_fails_the_audit_and_stops_start_up(tmp_path: Path, what: str) -> None:
    data = tmp_path / "certd-data"
    server = CertdServer(
        CertdConfig(data_dir=data, listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL)
    )
    server.start()
    with CertdClient(f"127.0.0.1:{server.port}") as c:
        c.certify(TASK, "25,-", "(25-5)*4+3")
    server.stop(grace_s=1)
    state = tmp_path / "audit.json"
    ok = _certd("audit", "--data-dir", str(data), "--state", str(state), "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    size = _junk(data, what)

    audit = _certd("audit", "--data-dir", str(data), "--state", str(state), "--json")
    assert audit.returncode == 1, audit.stdout + audit.stderr
    report = json.loads(audit.stdout)
    assert not report["ok"]
    [fault] = [f for f in report["faults"] if f["kind"] == "store"]
    where = size if what == "entry" else size + 5
    assert f"{what} at {where} beyond the tree size {size}" in fault["message"]

    with pytest.raises(ConsistencyError, match=f"refusing to start.*{what} at {where}"):
        CertdServer(CertdConfig(data_dir=data, listen="127.0.0.1:0")).start()
    serve = _certd("serve", "--data-dir", str(data), "--listen", "127.0.0.1:0")
    assert serve.returncode == 1
    assert "refusing to start" in serve.stdout + serve.stderr
    assert "certd audit" in serve.stdout + serve.stderr
