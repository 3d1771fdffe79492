"""RedisStore against a real redis-server: the store contract, atomic sequencing, policy checks."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from certd.errors import ConfigError, NotFoundError, StoreDamageError, StoreError
from certd.ledger.store import AppendConflictError, DuplicateKeyError
from certd.ledger.store.redis import RedisStore
from certd.tlog import (
    inclusion_proof,
    leaf_hash,
    root_from_leaf_hashes,
    verify_inclusion,
)

redis = pytest.importorskip("redis")


def entries(n: int, start: int = 0) -> list[tuple[str | None, bytes]]:
    return [(f"k{i}" if i % 2 == 0 else None, b"entry-%d" % i) for i in range(start, start + n)]


@pytest.fixture()
def store(redis_server: object, redis_prefix: str) -> RedisStore:
    s = RedisStore(redis_server.url, prefix=redis_prefix)  # type: ignore[attr-defined]
    yield s  # type: ignore[misc]
    s.close()


def test_round_trip_and_reopen(redis_server: object, redis_prefix: str) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    store = RedisStore(url, prefix=redis_prefix)
    assert store.size() == 0 and store.latest_checkpoint() is None
    assert store.append(entries(5)) == 0
    assert store.append(entries(8, start=5)) == 5
    assert store.size() == 13
    assert store.entries(3, 6) == [b"entry-3", b"entry-4", b"entry-5"]
    assert store.entry(12) == b"entry-12"
    assert store.find("k4") == 4 and store.find("k5") is None
    assert store.find_many(["k0", "k12", "x"]) == {"k0": 0, "k12": 12}
    leaves = [leaf_hash(b"entry-%d" % i) for i in range(13)]
    for size in range(14):
        assert store.root(size) == root_from_leaf_hashes(leaves[:size])
    assert store.nodes(2, 0, 3) == [
        root_from_leaf_hashes(leaves[0:4]),
        root_from_leaf_hashes(leaves[4:8]),
        root_from_leaf_hashes(leaves[8:12]),
    ]
    proof = inclusion_proof(7, 13, store.node)
    verify_inclusion(leaves[7], 7, 13, proof, store.root(13))
    store.put_checkpoint(13, "note-13")
    store.put_checkpoint(5, "note-5")
    store.close()
    with pytest.raises(StoreError):
        store.size()
    again = RedisStore(url, prefix=redis_prefix)
    assert again.size() == 13 and again.entry(0) == b"entry-0"
    assert again.latest_checkpoint() == (13, "note-13")  # the largest, not the last written
    assert again.checkpoint_at(5) == "note-5"
    with pytest.raises(NotFoundError):
        again.checkpoint_at(6)
    again.close()


def test_range_errors_and_checkpoint_bounds(store: RedisStore) -> None:
    store.append(entries(4))
    with pytest.raises(NotFoundError):
        store.entries(2, 5)
    with pytest.raises(NotFoundError):
        store.node(2, 1)  # incomplete
    with pytest.raises(NotFoundError):
        store.nodes_at([(0, 4)])
    with pytest.raises(Exception, match="size"):
        store.put_checkpoint(5, "beyond")


def test_duplicate_keys_are_refused_atomically(store: RedisStore) -> None:
    store.append([("a", b"1"), (None, b"2")])
    with pytest.raises(DuplicateKeyError) as info:
        store.append([("b", b"3"), ("a", b"4")])
    assert info.value.key == "a" and info.value.index == 0
    assert store.size() == 2 and store.find("b") is None


def test_compare_and_set_refuses_a_stale_writer(store: RedisStore) -> None:
    store.append(entries(3))
    with pytest.raises(AppendConflictError) as info:
        store._write_batch(1, [(None, b"late")], [])
    assert info.value.size == 3 and store.size() == 3
    assert store.entries(0, 3) == [b"entry-0", b"entry-1", b"entry-2"]


def test_many_writers_no_gap_no_duplicate(redis_server: object, redis_prefix: str) -> None:
    """Eight store objects (as eight replicas would) append concurrently with retries."""
    url = redis_server.url  # type: ignore[attr-defined]
    stores = [RedisStore(url, prefix=redis_prefix) for _ in range(8)]
    firsts: list[tuple[int, int, int]] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        for b in range(15):
            batch = [(f"w{w}-b{b}-{i}", b"w%d b%d i%d" % (w, b, i)) for i in range(3)]
            while True:
                try:
                    first = stores[w].append(batch)
                    break
                except AppendConflictError:
                    continue
            with lock:
                firsts.append((first, w, b))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = stores[0]
    assert s.size() == 8 * 15 * 3
    assert sorted(f for f, _, _ in firsts) == list(range(0, 8 * 15 * 3, 3))
    data = s.entries(0, s.size())
    for first, w, b in firsts:
        assert data[first : first + 3] == [b"w%d b%d i%d" % (w, b, i) for i in range(3)]
        assert s.find(f"w{w}-b{b}-0") == first
    assert s.root(s.size()) == root_from_leaf_hashes([leaf_hash(d) for d in data])
    for st in stores:
        st.close()


def test_missing_entry_and_node_are_reported(store: RedisStore) -> None:
    store.append(entries(4))
    p = store.key_prefix
    store.client.hdel(f"{p}:entries", "2")
    assert store.entries_with_gaps(0, 4)[2] is None
    with pytest.raises(StoreDamageError, match="entry 2"):
        store.entries(0, 4)
    store.client.setrange(f"{p}:nodes:1", 32, bytes(32))
    assert store.nodes(1, 0, 2)[1] is None
    with pytest.raises(StoreDamageError, match=r"node \(1, 1\)"):
        store.nodes_at([(2, 0), (1, 1)])


def test_persistence_policy_is_checked(tmp_path: Path) -> None:
    from redis_helpers import RedisProcess

    server = RedisProcess(tmp_path / "r", appendfsync="everysec").start()
    try:
        with pytest.raises(ConfigError, match="appendfsync always"):
            RedisStore(server.url, prefix="p")
        RedisStore(server.url, prefix="p", appendfsync="everysec").close()
        RedisStore(server.url, prefix="p", appendfsync="any").close()
    finally:
        server.stop()
    with pytest.raises(ConfigError):
        RedisStore("http://127.0.0.1:1/", prefix="p")
    with pytest.raises(ConfigError):
        RedisStore(server.url, prefix="a:b", appendfsync="any")
    with pytest.raises(StoreError, match="cannot open"):
        RedisStore(server.url, prefix="p", appendfsync="any", socket_timeout_s=1)


def test_an_entry_can_claim_several_unique_keys(store: RedisStore) -> None:
    from certd.ledger.store import KEY_SEPARATOR as SEP

    assert store.append([(f"label/a{SEP}canon/x", b"1"), (f"label/b{SEP}canon/y", b"2")]) == 0
    assert store.find("label/a") == 0 and store.find("canon/y") == 1
    assert store.find_many([f"label/c{SEP}canon/x"]) == {f"label/c{SEP}canon/x": 0}
    with pytest.raises(DuplicateKeyError) as info:  # a new label, a solution already claimed
        store.append([(f"label/c{SEP}canon/x", b"3")])
    assert info.value.index == 0  # found by the pre-check, or by the script under a race
    with pytest.raises(DuplicateKeyError) as info:  # the script itself, as under a race
        store._write_batch(2, [(f"label/c{SEP}canon/x", b"3")], [])
    assert (info.value.key, info.value.index) == ("canon/x", 0)
    with pytest.raises(DuplicateKeyError) as info:  # two entries of one append claim one key
        store.append([(f"label/d{SEP}canon/z", b"4"), (f"label/e{SEP}canon/z", b"5")])
    assert (info.value.key, info.value.index) == ("canon/z", None)
    assert store.size() == 2 and store.find("label/d") is None


def test_writer_lock_excludes_other_replicas(redis_server: object, redis_prefix: str) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    a, b = RedisStore(url, prefix=redis_prefix), RedisStore(url, prefix=redis_prefix)
    order: list[str] = []
    inside = threading.Event()

    def other() -> None:
        inside.wait()
        with b.writer_lock():
            order.append("b")

    t = threading.Thread(target=other)
    t.start()
    with a.writer_lock():
        inside.set()
        t.join(timeout=0.3)  # b must still be waiting for the lock
        order.append("a")
    t.join()
    assert order == ["a", "b"]
    a.close()
    b.close()
