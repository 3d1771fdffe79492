"""A certd cluster as real processes on 127.0.0.1: 3 replicas, one Redis, faults injected.

Concurrent CertifyBatch from many clients (no gap, no duplicate, every inclusion proof valid);
kill -9 of a replica mid-load (clients fail over, no acknowledged certificate lost); Redis
restarted from its AOF (audit passes, appends continue); ledger entries edited, deleted or
reordered by hand in Redis (``certd audit`` names the index and fails); idempotency keys
and rate limits across replicas.

The tests that leave the cluster serving share the module's one cluster (``cluster``: every
replica a test killed is started again before the next; each test checks the log from the size
it found, ``ledger_size``), each certifying puzzles no other test certifies; a test that
tampers with the log or runs another config starts its own.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cluster_helpers import IN_FLIGHT, Cluster, certify_items, check_acknowledged

from certd.ledger.store.redis import RedisStore
from certd.signing.dsse import KeyRing
from certd.signing.keys import VerifierKey
from certd.statements import verify_certificate
from certd.v1 import authority_pb2, authority_pb2_grpc
from forkgate import CertdClient, CertificationRefusedError, make_task
from forkgate._base import certify_request
from forkgate._channel import ClientSettings
from forkgate.puzzles import countdown_puzzles

pytest.importorskip("redis")
pytestmark = pytest.mark.slow

SETTINGS = ClientSettings(timeout_s=60, wait_for_ready=True, backoff_s=0.05, batch_size=16)


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster")).start()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture()
def cluster(shared_cluster: Cluster) -> Cluster:
    """The module's 3-replica cluster, every replica serving."""
    return shared_cluster.revive()


def ledger_size(c: Cluster) -> int:
    """The log's size in Redis now (where a test on the shared cluster starts)."""
    store = RedisStore(c.redis.url, appendfsync="any")
    try:
        return store.size()
    finally:
        store.close()


def audit(c: Cluster) -> dict[str, object]:
    done = c.audit()
    assert done.stdout, done.stderr
    return dict(json.loads(done.stdout))


def check_ledger(
    c: Cluster,
    certs: dict[str, authority_pb2.Certificate],
    *,
    lost_replies: int = 0,
    since: int = 0,
) -> int:
    """Every acknowledged certificate is in the ledger at its index; the indexes from ``since``
    (the size before the test wrote) are dense.

    ``lost_replies``: how many entries may be in the ledger without an acknowledgement (a
    process killed after the append was durable and before its reply left); 0 without faults.
    """
    store = RedisStore(c.redis.url, appendfsync="any")
    try:
        size = store.size()
        check_acknowledged(store.entry, size, certs, lost_replies, start=since)
    finally:
        store.close()
    report = audit(c)
    assert report["ok"] is True and report["size"] == size, report
    return size


def certify_all(
    c: Cluster,
    work: list[list[tuple[dict[str, object], str, str]]],
    certs: dict[str, authority_pb2.Certificate],
    errors: list[BaseException],
    lock: threading.Lock,
    address: list[str] | None = None,
) -> list[threading.Thread]:
    def client(items: list[tuple[dict[str, object], str, str]]) -> None:
        try:
            with CertdClient(
                address or c.addresses, trusted_keys=[c.vkey], settings=SETTINGS
            ) as cl:
                for start in range(0, len(items), 4):
                    batch = items[start : start + 4]
                    for (_, label, _), r in zip(batch, cl.certify_batch(batch), strict=True):
                        if isinstance(r, CertificationRefusedError):
                            assert r.reason == "PSEUDO_FORK", r
                            # never a pseudo-fork of its own label (a retry whose first reply
                            # was lost, its entry durable: tests/unit/ledger/…retry_race.py)
                            assert f"label {label!r}" not in str(r), (label, r)
                            continue
                        with lock:  # acknowledged, with a verified inclusion proof
                            prior = certs.setdefault(r.certificate_id, r)
                            assert prior.ledger_index == r.ledger_index
        except BaseException as e:  # noqa: BLE001  # reported by the test thread
            errors.append(e)

    threads = [threading.Thread(target=client, args=(w,)) for w in work]
    for t in threads:
        t.start()
    return threads


def test_concurrent_certify_batch_against_three_replicas(cluster: Cluster) -> None:
    items = certify_items(countdown_puzzles(24, seed=11))
    # 8 clients; each item is sent by two clients, so replicas race on the same labels.
    work = [items[i::4] for i in range(4)] * 2
    base = ledger_size(cluster)
    certs: dict[str, authority_pb2.Certificate] = {}
    errors: list[BaseException] = []
    for t in certify_all(cluster, work, certs, errors, threading.Lock()):
        t.join()
    assert not errors, errors
    assert len(certs) >= len(items) // 2
    check_ledger(cluster, certs, since=base)
    # Each (task, label) has exactly one certificate.
    keys = KeyRing([VerifierKey.from_vkey(cluster.vkey)])
    seen: set[tuple[str, str]] = set()
    for cert in certs.values():
        claim = verify_certificate(cert, keys)
        assert (claim.task_digest, claim.label) not in seen
        seen.add((claim.task_digest, claim.label))


def test_same_label_at_two_replicas_at_once_yields_one_certificate(cluster: Cluster) -> None:
    task, label, witness = certify_items(countdown_puzzles(1, seed=5))[0]
    got: list[authority_pb2.Certificate] = []
    barrier = threading.Barrier(6)
    base = ledger_size(cluster)

    def one(address: str) -> None:
        with CertdClient(address, trusted_keys=[cluster.vkey]) as c:
            barrier.wait()
            got.append(c.certify(task, label, witness))

    threads = [threading.Thread(target=one, args=(a,)) for a in cluster.addresses * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 6 and len({c.certificate_id for c in got}) == 1
    assert {c.ledger_index for c in got} == {base}
    check_ledger(cluster, {got[0].certificate_id: got[0]}, since=base)


def test_kill_9_of_a_replica_mid_load_loses_no_acknowledged_certificate(
    cluster: Cluster,
) -> None:
    items = certify_items(countdown_puzzles(40, seed=23))
    work = [items[i::6] for i in range(6)]
    base = ledger_size(cluster)
    certs: dict[str, authority_pb2.Certificate] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    threads = certify_all(cluster, work, certs, errors, lock, address=list(cluster.addresses))
    deadline = time.monotonic() + 60
    while len(certs) < 20 and time.monotonic() < deadline and not errors:
        time.sleep(0.01)
    victim = cluster.replicas[1]
    victim.kill()  # SIGKILL mid-load: in-flight calls on it fail; clients retry elsewhere
    acknowledged_before_kill = len(certs)
    for t in threads:
        t.join()
    assert not errors, errors
    assert acknowledged_before_kill >= 20 and len(certs) > acknowledged_before_kill
    size = check_ledger(cluster, certs, lost_replies=IN_FLIGHT, since=base)
    victim.start()  # a restarted replica rejoins the same ledger
    with CertdClient(victim.address, trusted_keys=[cluster.vkey]) as c:
        assert c.checkpoint().size == size


def test_redis_restarted_from_its_aof(cluster: Cluster) -> None:
    items = certify_items(countdown_puzzles(12, seed=31))
    half = len(items) // 2
    base = ledger_size(cluster)
    certs: dict[str, authority_pb2.Certificate] = {}
    with CertdClient(cluster.addresses, trusted_keys=[cluster.vkey], settings=SETTINGS) as c:
        for r in c.certify_batch(items[:half]):
            if not isinstance(r, CertificationRefusedError):
                certs[r.certificate_id] = r
        cluster.redis.restart(kill=True)  # SIGKILL; appendfsync always: nothing acked is lost
        assert audit(cluster)["ok"] is True
        for r in c.certify_batch(items[half:]):
            if not isinstance(r, CertificationRefusedError):
                certs[r.certificate_id] = r
    check_ledger(cluster, certs, since=base)


@pytest.fixture()
def own_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A cluster of one replica for a test that tampers with the log (Redis is what it edits
    and ``certd audit`` what it checks; one replica writes the entries)."""
    c = Cluster(tmp_path / "cluster", n=1).start()
    try:
        yield c
    finally:
        c.close()


@pytest.mark.parametrize("edit", ["edit", "delete", "reorder"])
def test_hand_edited_redis_entry_is_named_by_audit(own_cluster: Cluster, edit: str) -> None:
    cluster = own_cluster
    items = certify_items(countdown_puzzles(6, seed=41))
    with CertdClient(cluster.addresses[0], trusted_keys=[cluster.vkey]) as c:
        c.certify_batch(items)
    assert audit(cluster)["size"] >= 4
    store = RedisStore(cluster.redis.url, appendfsync="any")
    entries = f"{store.key_prefix}:entries"
    r = store.client
    if edit == "edit":
        data = bytes(r.hget(entries, "2"))
        r.hset(entries, "2", data.replace(b'"payload":"', b'"payload":"A', 1))
        want = {2}
    elif edit == "delete":
        r.hdel(entries, "2")
        want = {2}
    else:
        one, three = r.hget(entries, "1"), r.hget(entries, "3")
        r.hset(entries, mapping={"1": three, "3": one})
        want = {1, 3}
    store.close()
    done = cluster.audit()
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is False
    assert want <= {f["index"] for f in report["faults"]}, report["faults"]


def test_idempotency_key_replays_across_replicas(cluster: Cluster) -> None:
    items = certify_items(countdown_puzzles(2, seed=51))[:3]
    req = authority_pb2.CertifyBatchRequest(items=[certify_request(t, lb, w) for t, lb, w in items])
    meta = (("idempotency-key", "retry-me-1"),)
    replies = []
    for address in cluster.addresses[:2]:
        with grpc.insecure_channel(address) as ch:
            stub = authority_pb2_grpc.AuthorityStub(ch)
            reply, call = stub.CertifyBatch.with_call(req, metadata=meta, timeout=60)
            replies.append((reply, dict(call.trailing_metadata() or ())))
    (first, _), (second, trailers) = replies
    assert trailers.get("certd-idempotent-replay") == "1"
    assert first.SerializeToString() == second.SerializeToString()
    other = authority_pb2.CertifyBatchRequest(items=req.items[:1])
    with grpc.insecure_channel(cluster.addresses[2]) as ch:
        stub = authority_pb2_grpc.AuthorityStub(ch)
        with pytest.raises(grpc.RpcError) as info:
            stub.CertifyBatch(other, metadata=meta, timeout=60)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "different request" in str(info.value.details())


def test_a_reply_planted_in_redis_is_refused_not_replayed(cluster: Cluster) -> None:
    """Someone who can write to Redis swaps the stored reply of an idempotency key for one
    holding a forged certificate: a retry with that key gets an error, not the forgery."""
    import redis

    items = certify_items(countdown_puzzles(2, seed=53))[:1]
    req = authority_pb2.CertifyBatchRequest(items=[certify_request(t, lb, w) for t, lb, w in items])
    meta = (("idempotency-key", "planted-1"),)
    r = redis.Redis.from_url(cluster.redis.url)
    earlier = set(r.scan_iter("{certd}:idem:*"))  # other tests' keys on the shared cluster
    with grpc.insecure_channel(cluster.addresses[0]) as ch:
        reply = authority_pb2_grpc.AuthorityStub(ch).CertifyBatch(req, metadata=meta, timeout=60)
    forged = authority_pb2.CertifyBatchResponse()
    forged.CopyFrom(reply)
    forged.results[0].certificate.envelope = b'{"payload":"forged"}'
    [record] = set(r.scan_iter("{certd}:idem:*")) - earlier
    r.hset(record, "resp", forged.SerializeToString())
    with grpc.insecure_channel(cluster.addresses[1]) as ch:
        with pytest.raises(grpc.RpcError) as info:
            authority_pb2_grpc.AuthorityStub(ch).CertifyBatch(req, metadata=meta, timeout=60)
    assert info.value.code() == grpc.StatusCode.INTERNAL
    assert "refusing to replay" in str(info.value.details())
    r.close()


def test_rate_limit_is_shared_by_the_replicas(tmp_path: Path) -> None:
    c = Cluster(
        tmp_path / "rl", n=2, config={"cluster": {"rate_limit_per_s": 0.2, "rate_limit_burst": 3}}
    )
    c.start()
    try:
        task, label, witness = certify_items(countdown_puzzles(1, seed=61))[0]
        codes = []
        for i in range(5):
            with grpc.insecure_channel(c.addresses[i % 2]) as ch:
                stub = authority_pb2_grpc.AuthorityStub(ch)
                try:
                    stub.Certify(certify_request(task, label, witness), timeout=60)
                    codes.append(grpc.StatusCode.OK)
                except grpc.RpcError as e:
                    codes.append(e.code())
                    assert "rate limit" in str(e.details())
        assert codes == [grpc.StatusCode.OK] * 3 + [grpc.StatusCode.RESOURCE_EXHAUSTED] * 2
    finally:
        c.close()


def test_certificates_verify_against_the_task(cluster: Cluster) -> None:
    task, label, witness = certify_items(countdown_puzzles(1, seed=71))[0]
    with CertdClient(cluster.addresses, trusted_keys=[cluster.vkey]) as c:
        cert = c.certify(task, label, witness)
    claim = verify_certificate(
        cert, KeyRing([VerifierKey.from_vkey(cluster.vkey)]), task=make_task("countdown", task)
    )
    assert claim.label == label


def test_pseudo_fork_rule_holds_across_replicas(cluster: Cluster) -> None:
    """One solution written two ways, certified under two labels at two replicas at once:
    one certificate, the other request refused as PSEUDO_FORK."""
    task = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
    claims = [("25,-", "(25-5)*4+3"), ("3,+", "3+4*(25-5)")]  # commuted: the same solution
    base = ledger_size(cluster)
    outcomes: list[object] = []
    barrier = threading.Barrier(2)

    def one(address: str, label: str, witness: str) -> None:
        with CertdClient(address) as c:
            c.enumerate_families(task)  # connect first, so both calls start together
            barrier.wait()
            try:
                outcomes.append(c.certify(task, label, witness))
            except CertificationRefusedError as e:
                outcomes.append(e)

    threads = [
        threading.Thread(target=one, args=(a, label, w))
        for a, (label, w) in zip(cluster.addresses[:2], claims, strict=True)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    refused = [o for o in outcomes if isinstance(o, CertificationRefusedError)]
    assert len(outcomes) == 2 and len(refused) == 1, outcomes
    assert refused[0].reason == "PSEUDO_FORK"
    assert audit(cluster)["size"] == base + 1
