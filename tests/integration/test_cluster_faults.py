"""Faults under load on a 3-replica cluster, read back from every replica.

8 clients certify over 3 replicas on one Redis (AOF ``appendfsync always``); mid-load one
replica is killed with SIGKILL, then Redis is; both restart. Afterwards every acknowledged
certificate must be fetchable by id from **every** replica (a replica that missed what others
appended catches up from the ledger before answering NOT_FOUND), the indexes are dense and
unique, the audit passes, and a witness that cosigned before the faults cosigns the new
checkpoint (consistency proved across the faults).

The two tests share the module's cluster (every replica serving again before each test; the
ledger is checked from the size each test found) and certify distinct puzzles.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import IN_FLIGHT, Cluster, Witness, certify_items
from test_cluster import certify_all, check_ledger, ledger_size

from certd.v1 import authority_pb2
from forkgate import CertdClient, CertificationRefusedError
from forkgate.puzzles import countdown_puzzles

pytest.importorskip("redis")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster")).start()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture()
def cluster(shared_cluster: Cluster) -> Cluster:
    return shared_cluster.revive()


def wait_for(certs: dict[str, authority_pb2.Certificate], n: int, errors: list[object]) -> None:
    deadline = time.monotonic() + 120
    while len(certs) < n and time.monotonic() < deadline and not errors:
        time.sleep(0.01)


def test_kill_9_of_a_replica_and_of_redis_every_certificate_readable_everywhere(
    cluster: Cluster, tmp_path: Path
) -> None:
    witness = Witness(tmp_path / "witness")
    items = certify_items(countdown_puzzles(60, seed=97))
    base = ledger_size(cluster)
    with CertdClient(cluster.addresses[0], trusted_keys=[cluster.vkey]) as c:
        c.certify_batch(items[:2])
    first = witness.once(cluster.addresses[0], cluster.vkey)
    assert first["event"] == "cosigned"
    rest = items[2:]
    work = [rest[i::8] for i in range(8)]  # 8 clients over every replica
    certs: dict[str, authority_pb2.Certificate] = {}
    errors: list[BaseException] = []
    threads = certify_all(cluster, work, certs, errors, threading.Lock(), list(cluster.addresses))
    wait_for(certs, 20, errors)
    victim = cluster.replicas[1]
    victim.kill()  # SIGKILL mid-load
    killed_at = len(certs)
    wait_for(certs, killed_at + 20, errors)
    cluster.redis.restart(kill=True)  # SIGKILL of Redis mid-load; the AOF is fsynced per write
    for t in threads:
        t.join()
    assert not errors, errors
    victim.start()
    with CertdClient(cluster.addresses[0], trusted_keys=[cluster.vkey]) as c:
        for r in c.certify_batch(items[:2]):  # the first two again: existing or refused
            if not isinstance(r, CertificationRefusedError):
                certs.setdefault(r.certificate_id, r)
    assert len(certs) > killed_at + 20
    # unique indexes, each envelope at its index, audit OK; an entry whose reply died with the
    # killed replica (durable, never acknowledged) is allowed, up to what was in flight
    size = check_ledger(cluster, certs, lost_replies=IN_FLIGHT, since=base)
    for replica in cluster.replicas:  # every replica answers for every certificate
        with CertdClient(replica.address, trusted_keys=[cluster.vkey]) as c:
            for cert_id, cert in certs.items():
                got = c.get_certificate(certificate_id=cert_id)
                assert got.envelope == cert.envelope and got.ledger_index == cert.ledger_index
    after = witness.once(cluster.addresses[2], cluster.vkey)
    assert after["event"] == "cosigned" and f"\n{size}\n" in after["note"]


def test_a_replica_answers_for_certificates_another_replica_just_wrote(
    cluster: Cluster,
) -> None:
    """No wait between the write on one replica and the reads on the others: no NOT_FOUND."""
    items = certify_items(countdown_puzzles(6, seed=101))
    a, b, c = cluster.addresses
    with (
        CertdClient(a, trusted_keys=[cluster.vkey]) as ca,
        CertdClient(b, trusted_keys=[cluster.vkey]) as cb,
        CertdClient(c, trusted_keys=[cluster.vkey]) as cc,
    ):
        cb.get_fork_tree(items[0][0])  # b and c have read (and refreshed) before the writes
        cc.checkpoint()
        for (task, _, _), cert in zip(items, ca.certify_batch(items), strict=True):
            if isinstance(cert, CertificationRefusedError):
                continue  # a pseudo-fork of an earlier item
            assert cb.get_certificate(certificate_id=cert.certificate_id).envelope == cert.envelope
            assert cc.get_certificate(ledger_index=cert.ledger_index).envelope == cert.envelope
            tree = cc.get_fork_tree(task)
            assert cert.certificate_id in {x.certificate_id for x in tree.certificates}
