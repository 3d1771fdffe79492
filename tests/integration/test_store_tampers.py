"""Fifteen damaged SQLite stores: start-up refuses each one, the audit names where.

A real certd certifies into a real SQLite file once; each case copies it, edits the file
with sqlite3 as an attacker or a bad disk would, then starts a server on it (refused, one
line naming the index) and runs ``certd audit`` (exit 1, the same index, no traceback).
Issue 31: eight of these used to start and two went on signing over the damaged tree.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from server_helpers import LAZY_MATH, NO_POOL

from certd.cli import main as certd_main
from certd.config import CertdConfig
from certd.errors import ConsistencyError
from certd.service.server import CertdServer
from forkgate import CertdClient

CERTIFY = [
    (
        {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}},
        "25,-",
        "(25-5)*4+3",
    ),
    ({"domain": "countdown", "task": {"numbers": [10, 2, 3], "target": 23}}, "10,*", "10*2+3"),
    ({"domain": "countdown", "task": {"numbers": [6, 7, 1], "target": 43}}, "6,*", "6*7+1"),
    ({"domain": "countdown", "task": {"numbers": [9, 8, 2], "target": 74}}, "9,*", "9*8+2"),
    ({"domain": "countdown", "task": {"numbers": [9, 5, 2], "target": 47}}, "9,*", "9*5+2"),
]
Tamper = Callable[[sqlite3.Connection, int], str]


def _one(db: sqlite3.Connection, sql: str, *args: object) -> Any:
    return db.execute(sql, args).fetchone()[0]


def _delete_row(at: Callable[[int], int]) -> Tamper:
    def tamper(db: sqlite3.Connection, size: int) -> str:
        db.execute("DELETE FROM entries WHERE idx = ?", (at(size),))
        return f"entry at {at(size)}"

    return tamper


def _swap(db: sqlite3.Connection, size: int) -> str:
    a, b = (bytes(_one(db, "SELECT data FROM entries WHERE idx = ?", i)) for i in (1, 2))
    db.execute("UPDATE entries SET data = ? WHERE idx = 1", (b,))
    db.execute("UPDATE entries SET data = ? WHERE idx = 2", (a,))
    return "entry at 1"


def _edit(db: sqlite3.Connection, size: int) -> str:
    data = bytearray(_one(db, "SELECT data FROM entries WHERE idx = 2"))
    data[len(data) // 2] ^= 1
    db.execute("UPDATE entries SET data = ? WHERE idx = 2", (bytes(data),))
    return "entry at 2"


def _truncate(db: sqlite3.Connection, size: int) -> str:
    db.execute("DELETE FROM entries WHERE idx >= 2")
    return "entry at 2"


def _node(sql: str, where: str) -> Tamper:
    def tamper(db: sqlite3.Connection, size: int) -> str:
        db.execute(sql)
        return where

    return tamper


def _text_row(db: sqlite3.Connection, size: int) -> str:
    db.execute("UPDATE entries SET data = CAST(data AS TEXT) WHERE idx = 3")
    return "entry at 3"


def _no_checkpoints(db: sqlite3.Connection, size: int) -> str:
    db.execute("DELETE FROM checkpoints")
    return "checkpoint"


def _tree_size(delta: int) -> Tamper:
    def tamper(db: sqlite3.Connection, size: int) -> str:
        db.execute("UPDATE meta SET value = ? WHERE name = 'tree_size'", (size + delta,))
        return f"entry at {size - 1 if delta < 0 else size}"

    return tamper


def _junk_entry(db: sqlite3.Connection, size: int) -> str:
    db.execute("INSERT INTO entries(idx, key, data) VALUES (?, NULL, ?)", (size, b"junk"))
    return f"entry at {size}"


def _checkpoint_swapped(db: sqlite3.Connection, size: int) -> str:
    note = _one(db, "SELECT note FROM checkpoints WHERE size = 1")
    db.execute("UPDATE checkpoints SET note = ? WHERE size = ?", (note, size))
    return f"checkpoint at {size}"


TAMPERS: dict[str, Tamper] = {
    "deleted-middle-row": _delete_row(lambda size: size // 2),
    "deleted-last-row": _delete_row(lambda size: size - 1),
    "swapped-rows": _swap,
    "edited-row": _edit,
    "rows-truncated-past-2": _truncate,
    "zeroed-leaf-hash": _node(
        "UPDATE nodes SET hash = zeroblob(32) WHERE level = 0 AND idx = 3", "entry at 3"
    ),
    "zeroed-inner-node": _node(
        "UPDATE nodes SET hash = zeroblob(32) WHERE level = 1 AND idx = 1", "entry at 2"
    ),
    "deleted-node": _node("DELETE FROM nodes WHERE level = 2 AND idx = 0", "entry at 0"),
    "text-node-hash": _node(
        "UPDATE nodes SET hash = hex(hash) WHERE level = 0 AND idx = 1", "entry at 1"
    ),
    "text-data-row": _text_row,
    "all-checkpoints-deleted": _no_checkpoints,
    "latest-checkpoint-swapped": _checkpoint_swapped,
    "tree-size-raised": _tree_size(+1),
    "tree-size-lowered": _tree_size(-1),
    "junk-row-beyond-the-tree": _junk_entry,
}


@pytest.fixture(scope="module")
def honest_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("honest") / "certd-data"
    server = CertdServer(
        CertdConfig(data_dir=data, listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL)
    )
    server.start()
    with CertdClient(f"127.0.0.1:{server.port}") as c:
        for task, label, witness in CERTIFY:
            c.certify(task, label, witness)
    server.stop(grace_s=1)
    return data


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_a_damaged_store_never_serves_and_the_audit_names_where(
    name: str, honest_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "certd-data"
    shutil.copytree(honest_store, data)
    with sqlite3.connect(data / "ledger.sqlite") as db:
        size = int(_one(db, "SELECT value FROM meta WHERE name = 'tree_size'"))
        assert size >= 5
        where = TAMPERS[name](db, size)

    with pytest.raises(ConsistencyError, match="refusing to start") as refused:
        CertdServer(
            CertdConfig(data_dir=data, listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL)
        )
    assert where in str(refused.value)
    assert "\n" not in str(refused.value)

    capsys.readouterr()
    state = str(tmp_path / "audit.json")
    assert certd_main(["audit", "--data-dir", str(data), "--state", state, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"]
    named = [f"{f['kind']} {f['message']}" for f in report["faults"]] + [
        f"entry at {f['index']}" for f in report["faults"]
    ]
    assert any(where in line for line in named), report


def test_serve_on_a_store_with_a_deleted_row_exits_1_naming_the_row(
    honest_store: Path, tmp_path: Path
) -> None:
    data = tmp_path / "certd-data"
    shutil.copytree(honest_store, data)
    with sqlite3.connect(data / "ledger.sqlite") as db:
        db.execute("DELETE FROM entries WHERE idx = 2")
    serve = subprocess.run(
        [
            sys.executable,
            "-m",
            "certd.cli",
            "serve",
            "--data-dir",
            str(data),
            "--listen",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert serve.returncode == 1, serve.stderr
    [line] = serve.stderr.strip().splitlines()
    assert "refusing to start" in line and "entry at 2" in line
    assert "Traceback" not in serve.stderr
