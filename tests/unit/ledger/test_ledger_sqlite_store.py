"""SQLiteStore: round trips, reopening, limits, keys, atomicity, concurrent use."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from certd.errors import (
    ConfigError,
    InvalidInputError,
    LimitExceededError,
    NotFoundError,
    StoreDamageError,
    StoreError,
)
from certd.ledger.store import DuplicateKeyError, StoreLimits
from certd.ledger.store.sqlite import SQLiteStore
from certd.tlog import (
    inclusion_proof,
    leaf_hash,
    root_from_leaf_hashes,
    verify_inclusion,
)


def entries(n: int, start: int = 0) -> list[tuple[str | None, bytes]]:
    return [(f"k{i}" if i % 2 == 0 else None, b"entry-%d" % i) for i in range(start, start + n)]


def test_round_trip_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    store = SQLiteStore(path)
    assert store.size() == 0 and store.latest_checkpoint() is None
    assert store.append(entries(5)) == 0
    assert store.append(entries(8, start=5)) == 5
    assert store.size() == 13
    assert store.entries(3, 6) == [b"entry-3", b"entry-4", b"entry-5"]
    assert store.entry(12) == b"entry-12"
    assert store.find("k4") == 4 and store.find("k5") is None and store.find("nope") is None
    assert store.find_many(["k0", "k12", "x"]) == {"k0": 0, "k12": 12}
    leaves = [leaf_hash(b"entry-%d" % i) for i in range(13)]
    assert store.root(13) == root_from_leaf_hashes(leaves)
    assert store.root(6) == root_from_leaf_hashes(leaves[:6])
    assert store.node(0, 7) == leaves[7]
    assert store.nodes(2, 0, 3) == [
        root_from_leaf_hashes(leaves[0:4]),
        root_from_leaf_hashes(leaves[4:8]),
        root_from_leaf_hashes(leaves[8:12]),
    ]
    store.put_checkpoint(5, "cp5")
    store.put_checkpoint(13, "cp13")
    store.close()
    store.close()  # idempotent

    again = SQLiteStore(path)
    assert again.size() == 13
    assert again.latest_checkpoint() == (13, "cp13")
    assert again.checkpoint_at(5) == "cp5"
    assert again.find("k12") == 12
    proof = inclusion_proof(9, 13, again.node)
    verify_inclusion(leaves[9], 9, 13, proof, again.root(13))
    again.close()
    with pytest.raises(StoreError, match="closed"):
        again.size()


def test_wal_mode_and_sync_setting(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db", synchronous="NORMAL")
    store.append(entries(1))
    store.close()
    conn = sqlite3.connect(tmp_path / "a.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    with pytest.raises(ConfigError, match="synchronous"):
        SQLiteStore(tmp_path / "b.db", synchronous="OFF")


def test_range_errors() -> None:
    store = SQLiteStore(":memory:")
    store.append(entries(4))
    with pytest.raises(NotFoundError):
        store.entries(2, 5)
    with pytest.raises(NotFoundError):
        store.entry(4)
    with pytest.raises(NotFoundError):
        store.node(2, 1)  # leaves 4..7 do not exist yet
    with pytest.raises(NotFoundError):
        store.node(1, 2)
    with pytest.raises(NotFoundError):
        store.root(5)
    with pytest.raises(NotFoundError):
        store.checkpoint_at(4)
    with pytest.raises(InvalidInputError):
        store.put_checkpoint(5, "too far")
    store.close()


def test_limits() -> None:
    limits = StoreLimits(
        max_entry_bytes=10, max_key_chars=4, max_batch_entries=3, max_read_entries=2
    )
    store = SQLiteStore(":memory:", limits=limits)
    with pytest.raises(LimitExceededError, match="at most 10 bytes, got 11"):
        store.append([(None, b"x" * 11)])
    with pytest.raises(LimitExceededError, match="at most 4 characters"):
        store.append([("12345", b"x")])
    with pytest.raises(LimitExceededError, match="at most 3 entries"):
        store.append([(None, b"x")] * 4)
    with pytest.raises(InvalidInputError, match="at least one entry"):
        store.append([])
    with pytest.raises(InvalidInputError, match="non-empty string key"):
        store.append([("", b"x")])
    with pytest.raises(InvalidInputError, match="entry bytes"):
        store.append([(None, "text")])  # type: ignore[list-item]  # a str where bytes belong
    assert store.size() == 0
    store.append([(None, b"a"), (None, b"b"), (None, b"c")])
    with pytest.raises(LimitExceededError, match="at most 2 entries per read"):
        store.entries(0, 3)
    store.close()


def test_duplicate_keys_are_refused_atomically() -> None:
    store = SQLiteStore(":memory:")
    store.append([("a", b"1"), (None, b"2")])
    with pytest.raises(DuplicateKeyError) as info:
        store.append([("b", b"3"), ("a", b"4")])
    assert info.value.key == "a" and info.value.index == 0
    with pytest.raises(DuplicateKeyError) as info2:
        store.append([("c", b"5"), ("c", b"6")])
    assert info2.value.index is None
    assert store.size() == 2 and store.find("b") is None and store.find("c") is None
    store.close()


def test_second_writer_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    a, b = SQLiteStore(path), SQLiteStore(path)
    a.append(entries(3))
    with pytest.raises(StoreError, match="expected tree size 0 at commit, got 3"):
        b.append([(None, b"from b")])
    assert b.append([(None, b"from b")]) == 3  # b caught up and retries cleanly
    assert a.size() == 3  # a's view is stale until it writes; the data is intact
    c = SQLiteStore(path)
    assert c.entries(0, 4)[3] == b"from b"
    for store in (a, b, c):
        store.close()


def test_missing_rows_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    store = SQLiteStore(path)
    store.append(entries(4))
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM entries WHERE idx = 2")
    conn.execute("DELETE FROM nodes WHERE level = 1 AND idx = 0")
    conn.commit()
    conn.close()
    with pytest.raises(StoreDamageError, match="expected entry 2 in the store"):
        store.entries(0, 4)
    assert store.entries_with_gaps(0, 4)[2] is None
    with pytest.raises(StoreDamageError, match=r"expected node \(1, 0\) in the store"):
        store.node(1, 0)
    store.close()


def test_concurrent_readers_and_writer(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "c.db", synchronous="NORMAL")
    done = threading.Event()

    def reader() -> int:
        checks = 0
        while not done.is_set():
            n = store.size()
            if n:
                root = store.root(n)
                i = n // 2
                proof = inclusion_proof(i, n, store.node)
                verify_inclusion(leaf_hash(store.entry(i)), i, n, proof, root)
                checks += 1
        return checks

    with ThreadPoolExecutor(4) as pool:
        readers = [pool.submit(reader) for _ in range(4)]
        try:
            for batch in range(50):
                store.append([(None, b"%d-%d" % (batch, j)) for j in range(7)])
        finally:
            done.set()
        checks = [f.result() for f in readers]  # re-raises whatever a reader hit
    assert store.size() == 350
    assert sum(checks) > 0
    store.close()
