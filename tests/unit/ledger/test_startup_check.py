"""The start-up proof of a store and the "verified up to" mark it keeps (issue 31).

A real SQLite file and a real Ledger: the mark moves to the store's size at each start;
a rewritten verified prefix, an edited mark, and a row damaged while serving are refused.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from certd.errors import ConsistencyError
from certd.ledger import startup_check
from certd.ledger.log import Ledger
from certd.ledger.startup_check import extend_levels
from certd.ledger.store import Entry, Node
from certd.ledger.store.sqlite import SQLiteStore
from certd.signing.keys import SigningKey
from certd.tlog import CompactRange, leaf_hash

KEY = SigningKey.generate("certd.example/log")


def _open(tmp_path: Path) -> Ledger:
    store = SQLiteStore(tmp_path / "ledger.sqlite")
    try:
        return Ledger(store, KEY, KEY.name, verified_mark=tmp_path / "ledger.verified")
    except BaseException:
        store.close()
        raise


def _fill(tmp_path: Path, n: int) -> None:
    with _open(tmp_path) as ledger:
        ledger.append([(None, b"entry %d" % i) for i in range(n)])


def test_the_mark_moves_to_the_size_at_each_start(tmp_path: Path) -> None:
    _fill(tmp_path, 6)
    assert json.loads((tmp_path / "ledger.verified").read_text())["size"] == 0
    _open(tmp_path).close()
    mark = json.loads((tmp_path / "ledger.verified").read_text())
    assert mark["size"] == 6 and len(mark["frontier"]) == 2  # 6 = 4 + 2
    _open(tmp_path).close()  # from the mark on: nothing left to re-read, still starts


def test_a_rewritten_verified_prefix_is_refused(tmp_path: Path) -> None:
    _fill(tmp_path, 6)
    _open(tmp_path).close()  # verified up to 6
    with sqlite3.connect(tmp_path / "ledger.sqlite") as db:
        db.execute("UPDATE nodes SET hash = zeroblob(32) WHERE level = 2 AND idx = 0")
    with pytest.raises(
        ConsistencyError, match=r"refusing to start: entry at 0: stored node \(2, 0\)"
    ):
        _open(tmp_path)


def test_a_deleted_verified_row_is_refused_without_reading_it(tmp_path: Path) -> None:
    _fill(tmp_path, 6)
    _open(tmp_path).close()
    with sqlite3.connect(tmp_path / "ledger.sqlite") as db:
        db.execute("DELETE FROM entries WHERE idx = 3")
    with pytest.raises(
        ConsistencyError, match="refusing to start: 1 entry rows missing below size 6"
    ):
        _open(tmp_path)


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: {**m, "size": m["size"] + 2},
        lambda m: {**m, "root": "00" * 32},
        lambda m: {**m, "origin": "another/log"},
        lambda m: {**m, "frontier": m["frontier"][:1]},
        lambda m: {**m, "tail": "00" * 32},
        lambda m: {**m, "blocks": ["00" * 32]},
    ],
    ids=["size", "root", "origin", "frontier", "tail", "blocks"],
)
def test_an_edited_mark_is_refused(tmp_path: Path, edit: object) -> None:
    _fill(tmp_path, 6)
    _open(tmp_path).close()
    path = tmp_path / "ledger.verified"
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))  # type: ignore[operator]  # a lambda
    with pytest.raises(ConsistencyError, match="refusing to start"):
        _open(tmp_path)


@pytest.mark.parametrize("block", [4, 1 << 16])
@pytest.mark.parametrize("index", [0, 3, 5, 9])
def test_an_edited_row_before_the_mark_stops_the_start_naming_its_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int, index: int
) -> None:
    monkeypatch.setattr(startup_check, "BLOCK", block)  # 4: complete blocks and a tail
    _fill(tmp_path, 10)
    _open(tmp_path).close()  # verified up to 10
    assert len(json.loads((tmp_path / "ledger.verified").read_text())["blocks"]) == 10 // block
    with sqlite3.connect(tmp_path / "ledger.sqlite") as db:
        db.execute("UPDATE entries SET data = ? WHERE idx = ?", (b"forged", index))
    with pytest.raises(ConsistencyError, match=rf"refusing to start: entry at {index}: edited"):
        _open(tmp_path)


def test_bytes_moved_between_two_verified_rows_stop_the_start(tmp_path: Path) -> None:
    _fill(tmp_path, 10)
    _open(tmp_path).close()
    with sqlite3.connect(tmp_path / "ledger.sqlite") as db:  # the rows' concatenation is kept
        db.execute("UPDATE entries SET data = ? WHERE idx = 3", (b"entry 3e",))
        db.execute("UPDATE entries SET data = ? WHERE idx = 4", (b"ntry 4",))
    with pytest.raises(ConsistencyError, match="refusing to start: entry at 3: edited"):
        _open(tmp_path)


def test_an_edited_row_and_leaf_node_before_the_mark_stop_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(startup_check, "BLOCK", 4)
    _fill(tmp_path, 10)
    _open(tmp_path).close()
    with sqlite3.connect(tmp_path / "ledger.sqlite") as db:
        db.execute("UPDATE entries SET data = ? WHERE idx = 5", (b"forged",))
        db.execute("UPDATE nodes SET hash = ? WHERE level = 0 AND idx = 5", (leaf_hash(b"forged"),))
    with pytest.raises(ConsistencyError, match=r"refusing to start: entry at 4: stored node"):
        _open(tmp_path)


def test_a_version_1_mark_verifies_every_row_and_is_rewritten(tmp_path: Path) -> None:
    _fill(tmp_path, 6)
    _open(tmp_path).close()
    path = tmp_path / "ledger.verified"
    old = json.loads(path.read_text())
    v1 = {k: v for k, v in old.items() if k not in ("blocks", "tail")}
    path.write_text(json.dumps({**v1, "version": 1}))
    _open(tmp_path).close()
    assert json.loads(path.read_text()) == old


class _BadDisk(SQLiteStore):
    """A store whose disk garbles the leaf hash of every third entry it writes."""

    def _write_batch(self, first: int, entries: Sequence[Entry], nodes: Sequence[Node]) -> None:
        bad = [(lv, i, bytes(32) if lv == 0 and i % 3 == 2 else h) for lv, i, h in nodes]
        super()._write_batch(first, entries, bad)


def test_the_committer_signs_no_root_it_cannot_recompute_from_the_rows(tmp_path: Path) -> None:
    ledger = Ledger(_BadDisk(tmp_path / "ledger.sqlite"), KEY, KEY.name)
    try:
        ledger.append([(None, b"a"), (None, b"b")])
        with pytest.raises(ConsistencyError, match="refusing to sign size 3: entry at 2"):
            ledger.append([(None, b"c")])
        assert ledger.checkpoint().checkpoint.size == 2
    finally:
        ledger.close()


@pytest.mark.parametrize("start", [0, 1, 5, 6, 7, 8, 13])
@pytest.mark.parametrize("count", [1, 2, 3, 9, 16])
def test_extend_levels_is_compact_range_extend(start: int, count: int) -> None:
    leaves = [leaf_hash(b"%d" % i) for i in range(start + count)]
    before = CompactRange()
    before.extend(leaves[:start])
    reference = before.copy()
    created = reference.extend(leaves[start:])
    levels, after = extend_levels(before, leaves[start:])
    assert after.hashes == reference.hashes and after.root() == reference.root()
    flat = sorted((lv, lo + i, h) for lv, lo, hs in levels for i, h in enumerate(hs))
    assert flat == sorted(created)
