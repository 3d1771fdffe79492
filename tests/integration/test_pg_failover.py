"""Losing the PostgreSQL primary under load loses no acknowledged certificate.

A primary and a synchronous streaming standby (Debian's PostgreSQL 15, started here), two
certd replicas whose URL lists both servers, 8 clients certifying over both replicas. Mid-load
the primary and its backends are killed with SIGKILL and the standby is promoted; the
replicas reconnect to it on their own. Afterwards every acknowledged certificate is in the
ledger at its index and readable from every replica, the indexes are dense and unique,
``certd audit`` passes and a witness that cosigned before the failover cosigns after it
(consistency proved across it).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from certify_helpers import Item, certify_until_done
from cluster_helpers import IN_FLIGHT, Witness, certify_items, check_acknowledged
from pg_helpers import PgCluster

from certd.ledger.store.postgres import PostgresStore
from certd.v1 import authority_pb2
from forkgate import CertdClient, CertificationRefusedError
from forkgate._channel import ClientSettings
from forkgate.puzzles import countdown_puzzles

pytest.importorskip("psycopg")
pytestmark = pytest.mark.slow

SETTINGS = ClientSettings(timeout_s=30, wait_for_ready=True, backoff_s=0.2, batch_size=16)


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[PgCluster]:
    c = PgCluster(tmp_path / "cluster")
    try:
        yield c.start()
    finally:
        c.close()


def test_kill_9_of_the_primary_and_promotion_lose_no_acknowledged_certificate(
    cluster: PgCluster, tmp_path: Path
) -> None:
    witness = Witness(tmp_path / "witness")
    items = certify_items(countdown_puzzles(40, seed=131))
    with CertdClient(cluster.addresses[0], trusted_keys=[cluster.vkey]) as c:
        c.certify_batch(items[:2])
    assert witness.once(cluster.addresses[0], cluster.vkey)["event"] == "cosigned"
    certs: dict[str, authority_pb2.Certificate] = {}
    errors: list[BaseException] = []

    def client(work: list[Item]) -> None:
        try:
            certify_until_done(
                lambda: cluster.addresses, cluster.vkey, work, certs, settings=SETTINGS
            )
        except BaseException as e:  # noqa: BLE001  # reported by the test thread
            errors.append(e)

    rest = items[2:]
    threads = [threading.Thread(target=client, args=(rest[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while len(certs) < 16 and time.monotonic() < deadline and not errors:
        time.sleep(0.01)
    acknowledged_before = len(certs)
    cluster.fail_over()  # SIGKILL of the primary mid-load; the standby is promoted
    for t in threads:
        t.join()
    assert not errors, errors
    assert cluster.standby is not None and cluster.standby.sql("SELECT pg_is_in_recovery()") == "f"
    assert acknowledged_before >= 16 and len(certs) > acknowledged_before
    with CertdClient(cluster.addresses[0], trusted_keys=[cluster.vkey]) as c:
        for r in c.certify_batch(items[:2]):  # the first two again: the same certificates
            if not isinstance(r, CertificationRefusedError):
                certs.setdefault(r.certificate_id, r)
    size = check_ledger(cluster, certs, lost_replies=IN_FLIGHT)
    for replica in cluster.replicas:  # every replica answers for every certificate
        with CertdClient(replica.address, trusted_keys=[cluster.vkey]) as c:
            for cert_id, cert in certs.items():
                got = c.get_certificate(certificate_id=cert_id)
                assert got.envelope == cert.envelope and got.ledger_index == cert.ledger_index
    after = witness.once(cluster.addresses[1], cluster.vkey)
    assert after["event"] == "cosigned" and f"\n{size}\n" in after["note"]


def check_ledger(
    c: PgCluster, certs: dict[str, authority_pb2.Certificate], *, lost_replies: int = 0
) -> int:
    """Every acknowledged certificate is in the ledger at its index; the indexes are dense
    (``lost_replies``: entries durable before their process was killed, never acknowledged)."""
    store = PostgresStore(c.url)
    try:
        size = store.size()
        check_acknowledged(store.entry, size, certs, lost_replies)
    finally:
        store.close()
    done = c.audit()
    report = json.loads(done.stdout)
    assert report["ok"] is True and report["size"] == size, report
    return size
