"""The PostgreSQL ledger store on a real PostgreSQL 15: the same contract as the Redis store."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from pg_helpers import PgServer, remove_root

from certd.errors import ConfigError, NotFoundError, StoreError
from certd.ledger.log import Ledger
from certd.ledger.store import KEY_SEPARATOR, AppendConflictError, DuplicateKeyError
from certd.ledger.store.postgres import PostgresStore
from certd.ledger.store.sqlite import SQLiteStore
from certd.signing.keys import SigningKey
from certd.tlog import Checkpoint, leaf_hash, root_from_leaf_hashes, sign_checkpoint

pytest.importorskip("psycopg")


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    root = PgServer.make_root()
    server = PgServer(root).init().start()
    try:
        yield server
    finally:
        server.stop()
        remove_root(root)


def reference_root(entries: list[bytes]) -> bytes:
    return root_from_leaf_hashes([leaf_hash(e) for e in entries])


_schemas = iter(f"t{i}" for i in range(1000))


@pytest.fixture()
def store(pg: PgServer) -> Iterator[PostgresStore]:
    s = PostgresStore(pg.url(), schema=next(_schemas))
    try:
        yield s
    finally:
        s.close()


def test_appends_read_back_like_sqlite(store: PostgresStore) -> None:
    ref = SQLiteStore(":memory:")
    batches = [[(f"k{i}-{j}", f"entry {i} {j}".encode()) for j in range(i + 1)] for i in range(6)]
    for batch in batches:
        assert store.append(batch) == ref.append(batch)
    size = ref.size()
    assert store.size() == size == 21
    assert store.entries(0, size) == ref.entries(0, size)
    assert store.root(size) == ref.root(size) == reference_root(ref.entries(0, size))
    assert store.root(7) == ref.root(7)
    assert store.find("k3-2") == ref.find("k3-2")
    assert store.find("absent") is None
    assert store.unexplained() == []
    store.put_checkpoint(size, "note at 21")
    store.put_checkpoint(3, "note at 3")
    assert store.latest_checkpoint() == (21, "note at 21")
    assert store.checkpoint_at(3) == "note at 3"
    with pytest.raises(Exception, match=r"beyond|expected a checkpoint size"):
        store.put_checkpoint(size + 1, "too far")
    ref.close()


def test_duplicate_keys_and_key_parts_are_refused(store: PostgresStore) -> None:
    store.append([(f"a{KEY_SEPARATOR}b", b"one")])
    with pytest.raises(DuplicateKeyError) as got:
        store.append([(f"c{KEY_SEPARATOR}b", b"two")])
    assert got.value.index == 0
    with pytest.raises(DuplicateKeyError):
        store.append([(f"x{KEY_SEPARATOR}y", b"p"), (f"z{KEY_SEPARATOR}y", b"q")])
    assert store.size() == 1 and store.find("c") is None
    assert store.find("b") == 0 and store.find(f"c{KEY_SEPARATOR}b") == 0


def test_compare_and_set_refuses_a_stale_writer(pg: PgServer, store: PostgresStore) -> None:
    other = PostgresStore(pg.url(), schema=store.schema)
    try:
        other.append([(None, b"first")])
        with pytest.raises(AppendConflictError):
            store._write_batch(0, [(None, b"stale")], [])  # built on size 0
        assert store.size() == 1 and store.entries(0, 1) == [b"first"]
    finally:
        other.close()


def test_racing_writers_leave_dense_unique_indexes(pg: PgServer, store: PostgresStore) -> None:
    stores = [PostgresStore(pg.url(), schema=store.schema) for _ in range(3)]
    errors: list[BaseException] = []

    def write(s: PostgresStore, n: int) -> None:
        for i in range(15):
            while True:
                try:
                    with s.writer_lock():
                        s.append([(f"w{n}-{i}", f"{n}:{i}".encode())])
                    break
                except AppendConflictError:
                    continue
                except BaseException as e:  # noqa: BLE001  # reported by the test thread
                    errors.append(e)
                    return

    threads = [threading.Thread(target=write, args=(s, n)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert not errors, errors
    entries = store.entries(0, store.size())
    assert sorted(entries) == sorted(f"{n}:{i}".encode() for n in range(3) for i in range(15))
    assert store.root(len(entries)) == reference_root(entries)


def test_bad_settings_are_refused(pg: PgServer) -> None:
    with pytest.raises(ConfigError):
        PostgresStore(pg.url(), schema="Bad-Name")
    with pytest.raises(ConfigError, match="synchronous standby"):
        PostgresStore(pg.url(), schema="t_req", require_sync_standby=True)
    with pytest.raises(StoreError):
        PostgresStore("postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=1")


def test_a_replica_that_cannot_verify_the_shared_log_reports_unhealthy(
    store: PostgresStore,
) -> None:
    """A newer checkpoint in the shared store signed by a key this replica does not trust:
    ``Ledger.health`` names it (the health service then turns NOT_SERVING)."""
    key = SigningKey.generate("forkgate.test/pg")
    ledger = Ledger(store, key, "forkgate.test/pg")
    try:
        ledger.append([(None, b"entry")])
        assert ledger.health() is None
        size = store.append([(None, b"written by someone else")]) + 1
        forged = sign_checkpoint(
            Checkpoint("forkgate.test/pg", size, store.root(size)),
            SigningKey.generate("forkgate.test/pg"),
        )
        store.put_checkpoint(size, forged)
        reason = ledger.health()
        assert reason is not None and "cannot verify" in reason, reason
    finally:
        ledger.close()


def test_request_state_idempotency_records_and_rate_buckets(pg: PgServer) -> None:
    from certd.service.cluster_pg import PgClusterState

    state = PgClusterState(pg.url(), schema="t_state")
    try:
        record = state.record("alice", "/certd.v1.Authority/Certify", "key-1")
        assert state.claim(record, "digest", "owner-1", 10_000) == ("NEW", "", b"")
        assert state.claim(record, "digest", "owner-2", 10_000) == ("pending", "digest", b"")
        state.settle(record, "owner-2", b"not the owner's", 60_000)  # ignored
        state.settle(record, "owner-1", b"reply", 60_000)
        assert state.claim(record, "digest", "owner-3", 10_000) == ("done", "digest", b"reply")
        other = state.record("alice", "/certd.v1.Authority/Certify", "key-2")
        assert state.claim(other, "d2", "owner-4", 1)[0] == "NEW"
        time.sleep(0.05)  # the claim (1 ms) expired: its owner died
        assert state.claim(other, "d2", "owner-5", 10_000)[0] == "NEW"
        state.settle(other, "owner-5", b"", 60_000)  # a failed request leaves no record
        assert state.claim(other, "d2", "owner-6", 10_000)[0] == "NEW"
        assert state.take("bob", 1.0, 2) is None
        assert state.take("bob", 1.0, 2) is None
        wait_ms = state.take("bob", 1.0, 2)
        assert wait_ms is not None and 0 < wait_ms <= 1_000
        assert state.take("carol", 1.0, 2) is None  # buckets are per client
    finally:
        state.close()


def test_binary_array_parameters_round_trip(store: PostgresStore) -> None:
    from certd.ledger.store.postgres_arrays import bytea_array, int4_array, int8_array, text_array

    texts = ["", "k", "é✓ ключ", "x" * 600, KEY_SEPARATOR.join(["a", "b"])]
    blobs = [b"", b"\x00\xff", bytes(range(256)) * 40]
    big = [0, -1, 2**63 - 1, -(2**63), 7]
    small = [0, -1, 2**31 - 1, -(2**31)]
    with store._conns.cursor("round trip") as cur:
        cur.execute(
            b"SELECT %b::text[], %b::bytea[], %b::bigint[], %b::integer[], %b::text[], %b::bytea[]",
            (
                text_array(texts),
                bytea_array(blobs),
                int8_array(big),
                int4_array(small),
                text_array([]),
                bytea_array([]),
            ),
        )
        row = cur.fetchone()
    assert row is not None
    assert list(row) == [texts, blobs, big, small, [], []]


def test_node_ranges_read_like_sqlite(store: PostgresStore) -> None:
    ref = SQLiteStore(":memory:")
    batch = [(f"n{i}", b"entry %d" % i) for i in range(13)]
    store.append(batch)
    ref.append(batch)
    ranges = [(0, 3, 13), (1, 0, 6), (2, 1, 3), (3, 0, 1), (1, 2, 2)]
    assert store.node_ranges(ranges, within=13) == ref.node_ranges(ranges, within=13)
    assert store.node_ranges(ranges, within=13)[0][0] == leaf_hash(b"entry 3")
    with pytest.raises(NotFoundError):
        store.node_ranges([(2, 0, 4)], within=13)  # the 4th node of level 2 is incomplete
