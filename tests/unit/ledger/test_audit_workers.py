"""The audit starts worker processes only for a log of more than one chunk.

A log of one chunk (every log ``certd audit`` sees in this suite: chunks are 4,096 entries)
is checked in the auditing process, with no forkserver or workers to start; a longer one
shares its chunks out to the workers. Each audit runs in a fresh interpreter, which counts
its child processes afterwards (multiprocessing keeps the forkserver until the process exits).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

_AUDIT = """
import functools, json, sys
import psutil
sys.path.insert(0, {here!r})
from test_ledger_audit import ORIGIN, RING, make_log
from certd.ledger.audit import audit_store
from certd.ledger.store.sqlite import SQLiteStore
path = {path!r}
make_log(__import__("pathlib").Path(path), 20)
store = SQLiteStore(path)
report = audit_store(
    store, RING, None, origin=ORIGIN, workers=2, chunk_entries={chunk},
    opener=functools.partial(SQLiteStore, path) if {opener} else None,
)
store.close()
children = psutil.Process().children(recursive=True)
print(json.dumps({{"ok": report.ok, "checked": report.entries_checked,
                  "children": len(children)}}))
"""


def _audit(tmp_path: Path, chunk: int, opener: bool) -> dict[str, object]:
    code = _AUDIT.format(
        here=str(Path(__file__).parent), path=str(tmp_path / "l.db"), chunk=chunk, opener=opener
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("opener", [True, False], ids=["workers-read", "parent-reads"])
def test_a_log_of_one_chunk_is_audited_in_process(tmp_path: Path, opener: bool) -> None:
    got = _audit(tmp_path, chunk=4096, opener=opener)
    assert got == {"ok": True, "checked": 20, "children": 0}


@pytest.mark.parametrize("opener", [True, False], ids=["workers-read", "parent-reads"])
def test_a_log_of_several_chunks_starts_the_workers(tmp_path: Path, opener: bool) -> None:
    got = _audit(tmp_path, chunk=8, opener=opener)
    assert got["ok"] is True and got["checked"] == 20
    assert isinstance(got["children"], int) and got["children"] >= 1  # the forkserver at least
