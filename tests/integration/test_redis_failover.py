"""What a Redis failover does to a certd cluster: acknowledged certificates lost, and detected.

Redis replication is asynchronous (docs/operating-a-cluster.md, "What each store promises").
A primary (AOF ``always``) and a replica (AOF ``always``, ``--replicaof``, in sync), two certd
replicas on the primary, a witness that cosigns, 8 clients certifying. The replication link
is held (``ReplicationLink``: the primary's stream stops reaching the replica, a lagging
replica made deterministic) while the clients certify and the witness cosigns again; then the
primary is killed with SIGKILL, the held bytes are dropped, the replica is promoted
(``REPLICAOF NO ONE``) and the operator restarts the certd replicas on its URL.

Asserted, as documented: acknowledged certificates are lost (> 0: the window is real); the
certd replicas refuse to start on the promoted store (their remembered checkpoint is not
extended); replicas without that memory serve the shorter log, and the witness that cosigned
the larger checkpoint refuses to cosign it; lost certificates are not served at their index;
every acknowledged certificate below the promoted size is intact at its index and ``certd
audit`` of the promoted store passes (it is a consistent, shorter log: the fork is visible
only to those who hold a larger checkpoint). A second case runs without the hold (the natural
window) and reports its figures. Measured: docs/operating-a-cluster.md, "What each store
promises".
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from certify_helpers import Certs, Item, Sent, certify_until_done
from cluster_helpers import Cluster, Replica, Witness, certify_items, run_certd
from redis_failover_helpers import ReplicaRedis, ReplicationLink, wait_in_sync

from certd.ledger.store.redis import RedisStore
from forkgate import CertdClient
from forkgate._channel import ClientSettings
from forkgate.puzzles import countdown_puzzles

pytestmark = pytest.mark.slow

SETTINGS = ClientSettings(timeout_s=30, wait_for_ready=False, backoff_s=0.2, batch_size=16)


@dataclass
class Failover:
    acknowledged: Certs  # by the old log, before the failover
    size: int  # the promoted store's, then
    lag: int  # replication bytes the replica had not received
    refusal: str  # a certd replica's, restarted with its data dir


class FailoverCluster(Cluster):
    """``Cluster`` (primary Redis, 2 certd replicas) plus a Redis replica behind a link."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, n=2)
        self.link = ReplicationLink(self.redis.port)
        self.standby = ReplicaRedis(root / "standby", self.link.port)
        self.primary = self.redis
        self.sent: Sent = {}  # the item behind each acknowledged certificate

    def start(self) -> FailoverCluster:
        super().start()
        self.standby.start()
        wait_in_sync(self.primary, self.standby)
        return self

    def close(self) -> None:
        self.link.cut()
        self.primary.stop(kill=True)
        self.redis = self.standby
        super().close()


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[FailoverCluster]:
    c = FailoverCluster(tmp_path / "cluster")
    try:
        yield c.start()
    finally:
        c.close()


def witness_refusal(w: Witness, address: str, vkey: str) -> str:
    """Run ``certd witness --once``; it must not cosign: its error text."""
    done = run_certd(
        "witness", "--once", "--json", "--log", address, "--log-key", vkey,
        "--origin", w.origin, "--key", str(w.root / "witness.key"), "--state", str(w.state),
    )  # fmt: skip
    assert done.returncode != 0 and '"cosigned"' not in done.stdout, done.stdout
    return f"exit {done.returncode}: {(done.stdout + done.stderr).strip()}"


def fail_over(c: FailoverCluster, certs: Certs) -> Failover:
    """The primary's machine is lost: SIGKILL, the held stream dropped, the replica promoted,
    the certd replicas restarted on its URL. Where they remember a checkpoint the promoted
    store does not extend, they refuse to start; the operator then starts them without that
    memory (a data dir not on persistent storage)."""
    lag = c.standby.lag_behind(c.primary)
    c.primary.stop(kill=True)
    c.link.cut()
    c.standby.promote()
    c.redis = c.standby
    for r in c.replicas:  # every reply the old log gave has been given now
        r.kill()
        r.ledger_url = c.standby.url
    acknowledged = dict(certs)
    store = RedisStore(c.standby.url)
    try:
        size = store.size()
    finally:
        store.close()
    # the replica that remembers the largest checkpoint: the other may remember one the
    # promoted store still extends, and start
    remembering = max(c.replicas, key=remembered_size)
    refusal = start_refused(remembering) if remembered_size(remembering) > size else ""
    for r in c.replicas:
        for note in r.data_dir.glob("checkpoint-*.note"):
            note.unlink()
        r.start()
    return Failover(acknowledged, size, lag, refusal)


def remembered_size(r: Replica) -> int:
    """The size of the checkpoint a replica remembers in its data dir (0: none)."""
    notes = list(r.data_dir.glob("checkpoint-*.note"))
    return max((int(n.read_text().split("\n")[1]) for n in notes), default=0)


def start_refused(r: Replica) -> str:
    """``certd serve`` on the promoted store with the replica's data dir: it must refuse."""
    done = run_certd(
        "serve", "--data-dir", str(r.data_dir), "--listen", "127.0.0.1:0",
        "--ledger", r.ledger_url, "--config", str(r.data_dir / "config.json"), "--json",
        timeout=60,
    )  # fmt: skip
    assert done.returncode != 0, done.stdout
    return f"exit {done.returncode}: {done.stdout.strip()}"


def run_failover(c: FailoverCluster, witness: Witness, *, hold: bool) -> tuple[Failover, int]:
    """8 clients certify; the witness cosigns mid-load (with ``hold``, a checkpoint only the
    primary has); the primary is lost; the clients finish on the promoted log. The failover
    and the size the witness cosigned."""
    items = certify_items(countdown_puzzles(80, seed=137))
    with CertdClient(c.addresses[0], trusted_keys=[c.vkey]) as cl:
        cl.certify_batch(items[:2])
    assert witness.once(c.addresses[0], c.vkey)["event"] == "cosigned"
    wait_in_sync(c.primary, c.standby)
    if hold:
        c.link.hold()  # from here the primary's writes reach only the primary
    certs: Certs = {}
    c.sent = {}
    errors: list[BaseException] = []

    def client(work: list[Item]) -> None:
        try:
            # an entry Redis lost is certified again at another index: same_index off
            certify_until_done(
                lambda: c.addresses, c.vkey, work, certs,
                settings=SETTINGS, sent=c.sent, same_index=False,
            )  # fmt: skip
        except BaseException as e:  # noqa: BLE001  # reported by the test thread
            errors.append(e)

    threads = [threading.Thread(target=client, args=(items[2 + i :: 8],)) for i in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while len(certs) < 24 and time.monotonic() < deadline and not errors:
        time.sleep(0.01)
    cosigned = witness.once(c.addresses[0], c.vkey)
    fo = fail_over(c, certs)
    for t in threads:
        t.join()
    assert not errors, errors
    return fo, int(cosigned["note"].split("\n")[1])


def test_redis_failover_loses_acknowledged_certificates_and_the_fork_is_detected(
    cluster: FailoverCluster, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    witness = Witness(tmp_path / "witness")
    fo, cosigned_size = run_failover(cluster, witness, hold=True)
    assert "latest checkpoint" in fo.refusal, fo.refusal  # the replicas refuse to start
    lost = check_promoted(cluster, fo.acknowledged, fo.size)
    again = recertify(cluster, [cluster.sent[k] for k in lost])  # the lost items, anew
    refused = witness_refusal(witness, cluster.addresses[0], cluster.vkey)
    print(
        f"\nheld link: acknowledged before the failover {len(fo.acknowledged)}, lost "
        f"{len(lost)}, promoted size {fo.size}, witness cosigned size {cosigned_size}, "
        f"replication lag {fo.lag} B, new log size {again}, {time.monotonic() - t0:.1f} s\n"
        f"replica refused: {fo.refusal[:300]}\nwitness refused: {refused[:300]}"
    )
    assert lost, "no acknowledged certificate lost: the replication window was not exercised"
    assert cosigned_size > fo.size
    with CertdClient(cluster.addresses, trusted_keys=[cluster.vkey]) as cl:
        for cert_id in lost:  # not served at its index: another entry, or none
            cert = fo.acknowledged[cert_id]
            try:
                got = cl.get_certificate(ledger_index=cert.ledger_index)
            except Exception:  # noqa: BLE001  # NOT_FOUND, or a proof that does not verify
                continue
            assert got.envelope != cert.envelope


def test_redis_failover_natural_window(cluster: FailoverCluster, tmp_path: Path) -> None:
    """No held link: what an in-sync replica misses when its primary dies mid-load (figures
    reported, no loss asserted). A loss, if any, is detected as above."""
    t0 = time.monotonic()
    witness = Witness(tmp_path / "witness")
    fo, cosigned_size = run_failover(cluster, witness, hold=False)
    lost = check_promoted(cluster, fo.acknowledged, fo.size)
    print(
        f"\nnatural window: acknowledged before the failover {len(fo.acknowledged)}, lost "
        f"{len(lost)}, promoted size {fo.size}, witness cosigned size {cosigned_size}, "
        f"replication lag {fo.lag} B, {time.monotonic() - t0:.1f} s, replica refused: "
        f"{fo.refusal[:200] or 'no'}"
    )
    if lost:
        assert fo.refusal
    if cosigned_size > fo.size:  # the witness holds entries the promoted store lost
        witness_refusal(witness, cluster.addresses[0], cluster.vkey)
    else:  # nothing it cosigned was lost: it goes on cosigning
        assert witness.once(cluster.addresses[0], cluster.vkey)["event"] == "cosigned"


def recertify(c: FailoverCluster, items: list[Item]) -> int:
    """Certify ``items`` again on the promoted log; its size afterwards."""
    with CertdClient(c.addresses, trusted_keys=[c.vkey]) as cl:
        for start in range(0, len(items), 16):
            cl.certify_batch(items[start : start + 16])
    store = RedisStore(c.standby.url)
    try:
        return store.size()
    finally:
        store.close()


def check_promoted(c: FailoverCluster, certs: Certs, promoted_size: int) -> list[str]:
    """The acknowledged certificates the promoted store lost (at or past its size then, each
    now absent or another entry at its index); every one below that size is intact at its
    index, and ``certd audit`` passes."""
    store = RedisStore(c.standby.url)
    try:
        size = store.size()
        lost = [k for k, v in certs.items() if v.ledger_index >= promoted_size]
        for k, v in certs.items():
            if v.ledger_index < promoted_size:
                assert store.entry(v.ledger_index) == v.envelope, k
            elif v.ledger_index < size:
                assert store.entry(v.ledger_index) != v.envelope, k
    finally:
        store.close()
    report = json.loads(c.audit().stdout)
    assert report["ok"] is True and report["size"] == size, report
    return lost
