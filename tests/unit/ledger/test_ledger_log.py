"""Ledger: group commit, proofs against signed checkpoints, refusal to sign inconsistently."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from certd.errors import (
    ConsistencyError,
    InvalidInputError,
    LedgerError,
    LimitExceededError,
    NotFoundError,
    SigningError,
)
from certd.ledger.log import GroupCommitConfig, Ledger
from certd.ledger.store import DuplicateKeyError
from certd.ledger.store.sqlite import SQLiteStore
from certd.signing.keys import SigningKey
from certd.tlog import (
    EMPTY_ROOT,
    leaf_hash,
    open_checkpoint,
    verify_consistency,
    verify_inclusion,
)

ORIGIN = "certd.example/log"
KEY = SigningKey(ORIGIN, bytes(range(32)))


def open_ledger(path: Path, **config: float) -> Ledger:
    cfg = GroupCommitConfig(**config)  # type: ignore[arg-type]  # test-only keyword pass-through
    return Ledger(SQLiteStore(path, synchronous="NORMAL"), KEY, ORIGIN, config=cfg)


def count_checkpoints(path: Path) -> int:
    conn = sqlite3.connect(path)
    (n,) = conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()
    conn.close()
    return int(n)


def test_fresh_ledger_signs_the_empty_tree(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.db") as ledger:
        cp = ledger.checkpoint()
        assert cp.checkpoint.size == 0 and cp.checkpoint.root_hash == EMPTY_ROOT
        assert open_checkpoint(cp.note, [KEY.verifier()], origin=ORIGIN) == cp.checkpoint


def test_append_proofs_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with open_ledger(path) as ledger:
        assert ledger.append([("a", b"one"), (None, b"two")]) == [0, 1]
        first = ledger.checkpoint().checkpoint
        assert ledger.append([("c", b"three")]) == [2]
        latest, proof = ledger.prove(1)
        assert latest.checkpoint.size == 3
        verify_inclusion(leaf_hash(b"two"), 1, 3, proof, latest.checkpoint.root_hash)
        old_proof = ledger.inclusion_proof(0, first.size)
        verify_inclusion(leaf_hash(b"one"), 0, first.size, old_proof, first.root_hash)
        cproof = ledger.consistency_proof(first.size, 3)
        verify_consistency(first.size, 3, cproof, first.root_hash, latest.checkpoint.root_hash)
        assert ledger.find("c") == 2 and ledger.entry(2) == b"three"
        assert ledger.size() == 3
        assert ledger.checkpoint_at(first.size).checkpoint == first
        assert ledger.checkpoint_at(3) == latest
        with pytest.raises(NotFoundError):
            ledger.checkpoint_at(1)  # no batch ended there
        assert ledger.entries(0, 3) == [b"one", b"two", b"three"]
        with pytest.raises(NotFoundError, match="latest checkpoint"):
            ledger.inclusion_proof(0, 4)
        with pytest.raises(NotFoundError):
            ledger.consistency_proof(1, 4)
    with open_ledger(path) as again:
        assert again.checkpoint().checkpoint.size == 3
        assert again.append([(None, b"four")]) == [3]


def test_group_commit_from_8_threads(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    per_thread, threads = 150, 8
    results: dict[str, int] = {}
    lock = threading.Lock()
    with open_ledger(path, max_batch_entries=64, max_delay_s=0.01) as ledger:

        def worker(t: int) -> None:
            futures: list[tuple[str, Future[int]]] = []
            for i in range(per_thread):
                key = f"t{t}-{i}"
                futures.append((key, ledger.submit(key, key.encode())))
            for key, f in futures:
                index = f.result(timeout=30)
                with lock:
                    results[key] = index

        pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        total = per_thread * threads
        assert len(results) == total
        assert sorted(results.values()) == list(range(total))  # no gaps, no duplicates
        for key, index in results.items():
            assert ledger.entry(index) == key.encode()
            assert ledger.find(key) == index
        assert ledger.checkpoint().checkpoint.size == total
    # Batched: far fewer checkpoints (one per transaction) than entries.
    assert count_checkpoints(path) < total // 4


def test_close_flushes_pending_submits(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    ledger = open_ledger(path, max_batch_entries=1000, max_delay_s=0.5)
    futures = [ledger.submit(None, b"%d" % i) for i in range(300)]
    ledger.close()
    assert all(f.done() for f in futures)
    assert sorted(f.result() for f in futures) == list(range(300))
    with pytest.raises(LedgerError, match="closed"):
        ledger.submit(None, b"late")
    store = SQLiteStore(path)
    assert store.size() == 300
    assert store.latest_checkpoint() is not None
    assert store.latest_checkpoint()[0] == 300  # type: ignore[index]  # checked not None above
    store.close()


def test_duplicate_keys(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "d.db", max_delay_s=0.05) as ledger:
        ledger.append([("k", b"1")])
        with pytest.raises(DuplicateKeyError) as info:
            ledger.append([("k", b"again")])
        assert info.value.index == 0
        # Two submits with one key in the same batch: one wins, the other is refused,
        # and an unrelated entry in the batch is not affected.
        f1 = ledger.submit("x", b"a")
        f2 = ledger.submit("x", b"b")
        f3 = ledger.submit(None, b"c")
        assert f1.result() == 1
        with pytest.raises(DuplicateKeyError):
            f2.result()
        assert f3.result() == 2
        assert ledger.checkpoint().checkpoint.size == 3


def test_refuses_to_sign_after_tampering(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    ledger = open_ledger(path)
    ledger.append([(None, b"%d" % i) for i in range(8)])
    signed = ledger.checkpoint()
    # Rewrite history under the running ledger: replace the root node of the 8 leaves.
    conn = sqlite3.connect(path)
    conn.execute("UPDATE nodes SET hash = ? WHERE level = 3 AND idx = 0", (b"\x00" * 32,))
    conn.commit()
    conn.close()
    with pytest.raises(ConsistencyError, match="expected the stored root at size 8"):
        ledger.append([(None, b"after tamper")])
    with pytest.raises(ConsistencyError):
        ledger.submit(None, b"later")  # fail-stop: no more appends
    assert ledger.checkpoint() == signed  # nothing new was signed
    ledger.close()
    store = SQLiteStore(path)
    assert store.size() == 8  # and nothing was written
    assert store.latest_checkpoint() == (8, signed.note)
    store.close()
    # Reopening over the tampered store is refused too.
    reopened = SQLiteStore(path)
    with pytest.raises(ConsistencyError):
        Ledger(reopened, KEY, ORIGIN)
    reopened.close()


def test_refuses_history_shorter_than_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with open_ledger(path) as ledger:
        ledger.append([(None, b"a"), (None, b"b")])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = 1 WHERE name = 'tree_size'")
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    # rows beyond the (shrunk) tree size: refused before anything is read as the tree
    with pytest.raises(ConsistencyError, match=r"refusing to start.*entry at 1 beyond"):
        Ledger(store, KEY, ORIGIN)
    store.close()


def test_recovers_entries_appended_without_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with open_ledger(path) as ledger:
        ledger.append([(None, b"a")])
    store = SQLiteStore(path)  # simulate a crash between append and checkpoint
    store.append([(None, b"b"), (None, b"c")])
    store.close()
    with open_ledger(path) as ledger:
        cp = ledger.checkpoint().checkpoint
        assert cp.size == 3
        assert ledger.store.root(3) == cp.root_hash


def test_checkpoint_by_another_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with open_ledger(path):
        pass
    other = SigningKey(ORIGIN, bytes(32))
    store = SQLiteStore(path)
    with pytest.raises(SigningError):
        Ledger(store, other, ORIGIN)
    store.close()


def test_submit_validates_synchronously(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "v.db") as ledger:
        with pytest.raises(InvalidInputError, match="at least one entry"):
            ledger.append([])
        with pytest.raises(InvalidInputError, match="non-empty string key"):
            ledger.submit("", b"x")
        with pytest.raises(LimitExceededError):
            ledger.submit(None, b"x" * (ledger.store.limits.max_entry_bytes + 1))
