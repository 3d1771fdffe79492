"""Ledger over a shared RedisStore: several ledgers (replicas) on one Redis, fail-stop, restarts."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from certd.errors import ConsistencyError
from certd.ledger.audit import audit_store
from certd.ledger.log import GroupCommitConfig, Ledger
from certd.ledger.store import DuplicateKeyError
from certd.ledger.store.redis import RedisStore
from certd.signing.dsse import KeyRing, sign_envelope
from certd.signing.intoto import make_statement
from certd.signing.keys import SigningKey
from certd.statements import PREDICATE_VERDICT_RECEIPT, receipt_predicate
from certd.tlog import leaf_hash, verify_consistency, verify_inclusion

pytest.importorskip("redis")

ORIGIN = "certd.example/log"
KEY = SigningKey(ORIGIN, bytes(range(32)))


def open_ledger(url: str, prefix: str, checkpoint_file: Path | None = None) -> Ledger:
    return Ledger(
        RedisStore(url, prefix=prefix),
        KEY,
        ORIGIN,
        config=GroupCommitConfig(max_delay_s=0.001),
        checkpoint_file=checkpoint_file,
        refresh_interval_s=0.0,
    )


def envelope(text: str) -> bytes:
    """A receipt statement whose batch root is the hash of ``text`` (what the audit opens)."""
    root = hashlib.sha256(text.encode()).digest()
    predicate = receipt_predicate(batch_root=root, batch_size=1, verifiers=["v"], issued_at=0)
    body = make_statement([("verdict-batch", root.hex())], PREDICATE_VERDICT_RECEIPT, predicate)
    return sign_envelope(body, "application/vnd.in-toto+json", KEY).to_json()


def test_three_replicas_share_one_ledger(redis_server: object, redis_prefix: str) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    replicas = [open_ledger(url, redis_prefix) for _ in range(3)]
    got: dict[bytes, int] = {}
    lock = threading.Lock()

    def client(r: int, c: int) -> None:
        for i in range(12):
            data = envelope(f"r{r} c{c} i{i}")
            (index,) = replicas[r].append([(f"r{r}c{c}i{i}", data)], timeout_s=60)
            latest, path = replicas[r].prove(index)
            verify_inclusion(
                leaf_hash(data), index, latest.checkpoint.size, path, latest.checkpoint.root_hash
            )
            with lock:
                got[data] = index

    threads = [threading.Thread(target=client, args=(r, c)) for r in range(3) for c in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = 3 * 3 * 12
    assert sorted(got.values()) == list(range(total))  # no gap, no duplicate
    for ledger in replicas:
        assert ledger.checkpoint().checkpoint.size == total  # readers adopt the latest
    store = replicas[0].store
    for data, index in got.items():
        assert store.entry(index) == data
    # Every stored checkpoint is consistent with the latest.
    latest = replicas[1].checkpoint().checkpoint
    report = audit_store(store, KeyRing([KEY.verifier()]), None)
    assert report.ok, report.summary()
    assert report.checkpoint_size == total
    for ledger in replicas:
        ledger.close()
    assert latest.size == total


def test_a_key_taken_by_another_replica_fails_only_its_request(
    redis_server: object, redis_prefix: str
) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    a, b = open_ledger(url, redis_prefix), open_ledger(url, redis_prefix)
    assert a.append([("shared", envelope("a"))]) == [0]
    with pytest.raises(DuplicateKeyError) as info:
        b.append([("shared", envelope("b"))])
    assert info.value.index == 0
    assert b.append([("other", envelope("c"))]) == [1]
    a.close()
    b.close()


def test_tampered_redis_stops_every_replica(redis_server: object, redis_prefix: str) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    a = open_ledger(url, redis_prefix)
    a.append([(None, envelope(str(i))) for i in range(8)])
    signed = a.checkpoint()
    store = a.store
    assert isinstance(store, RedisStore)
    store.client.setrange(f"{store.key_prefix}:nodes:3", 0, b"\x01" * 32)
    with pytest.raises(ConsistencyError, match="expected the stored root at size 8"):
        a.append([(None, envelope("after"))])
    with pytest.raises(ConsistencyError):
        open_ledger(url, redis_prefix)  # a fresh replica refuses to start on it
    assert a.checkpoint() == signed and store.size() == 8
    a.close()


def test_restarted_replica_refuses_a_rolled_back_redis(
    redis_server: object, redis_prefix: str, tmp_path: Path
) -> None:
    """A Redis that lost acknowledged entries (and checkpoints) is not signed over."""
    url = redis_server.url  # type: ignore[attr-defined]
    remembered = tmp_path / "latest-checkpoint"
    a = open_ledger(url, redis_prefix, remembered)
    a.append([(None, envelope(str(i))) for i in range(5)])
    assert remembered.read_text() == a.checkpoint().note
    a.close()
    # Roll Redis back to 3 entries, as an old snapshot would, checkpoints included.
    store = RedisStore(url, prefix=redis_prefix)
    p = store.key_prefix
    r = store.client
    r.set(f"{p}:size", 3)
    r.hdel(f"{p}:entries", "3", "4")
    r.hdel(f"{p}:checkpoints", "5")
    r.set(f"{p}:checkpoint:latest", 0)
    store.close()
    with pytest.raises(ConsistencyError, match="expected at least 5 stored entries"):
        open_ledger(url, redis_prefix, remembered)
    # Without the remembered checkpoint the rollback cannot be seen from Redis alone.
    fresh = open_ledger(url, redis_prefix)
    assert fresh.checkpoint().checkpoint.size == 3
    fresh.close()


def test_replica_adopts_and_checks_checkpoints_of_others(
    redis_server: object, redis_prefix: str
) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    a, b = open_ledger(url, redis_prefix), open_ledger(url, redis_prefix)
    a.append([(None, envelope("1")), (None, envelope("2"))])
    old = a.checkpoint().checkpoint
    b.append([(None, envelope("3"))])
    new = a.checkpoint().checkpoint  # a sees b's checkpoint
    assert new.size == 3
    proof = a.consistency_proof(old.size, new.size)
    verify_consistency(old.size, new.size, proof, old.root_hash, new.root_hash)
    a.close()
    b.close()
