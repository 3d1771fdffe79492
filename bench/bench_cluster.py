"""A certd cluster side by side: certification throughput of 3 replicas on one Redis, 1 replica
on Redis, and the embedded SQLite store; CPU per certificate; inclusion proofs at 1,000,000
entries in Redis.

Every server is a real ``certd serve`` process on 127.0.0.1 (``--ledger redis://…`` for the
Redis runs), Redis a real ``redis-server`` with ``appendfsync always``. Clients are threads
here sending CertifyBatch (distinct (task, label) pairs, witnesses enumerated before timing)
round robin over the replicas, without offline checks, so the client's CPU stays small.
Replica start-up: seconds from spawning ``certd serve`` to serving, on the 1,000,000-entry
ledger (keyless entries, as receipts are), on an empty one, and on the 1,000,000 entries plus
100,000 keyed certificate entries (synthetic, unsigned: start-up indexing parses them
without checking signatures) that the replica must index.

CPU time of each process (certd replicas with their children, Redis, this client process) is
read from /proc before and after, so the report says where the time goes: on a 2-core
machine the replicas share the cores, and throughput cannot scale beyond them.

Inclusion proofs: 1,000,000 entries are appended straight into a RedisStore (Lua appends of
10,000), a replica serves them, and random GetInclusionProof calls are timed over gRPC
(end to end) and at the store (one pipelined Redis round trip, no cache).

Run: ``.venv/bin/python bench/bench_cluster.py`` → ``bench/results/cluster.json``
(about 5 minutes; needs ``redis-server``).
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import certify_requests, write

from certd.ledger.log import Ledger
from certd.ledger.store.redis import RedisStore
from certd.signing.keys import SigningKey, save_signing_key
from certd.statements import PREDICATE_FEASIBILITY
from certd.tlog import inclusion_proof
from forkgate import CertdClient, CertificationRefusedError
from forkgate._channel import ClientSettings

ROOT = Path(__file__).resolve().parents[1]
KEY_NAME = "forkgate.bench/cluster"
CLIENTS = 6
BATCH = 50
PROOF_ENTRIES = int(os.environ.get("BENCH_CLUSTER_ENTRIES", "1000000"))
REQUESTS = int(os.environ.get("BENCH_CLUSTER_REQUESTS", "3000"))
PROOF_SAMPLES = 3000
CERT_ENTRIES = int(os.environ.get("BENCH_CLUSTER_CERTIFICATES", "100000"))
P99_TARGET_MS = 5.0
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its reaped and live descendants."""
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICK
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            total += cpu_seconds(int(child))
    except (OSError, IndexError, ValueError):
        pass
    return total


class Redis:
    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port),
             "--dir", str(directory), "--appendonly", "yes", "--appendfsync", "always",
             "--save", "", "--logfile", str(directory / "redis.log")],
        )  # fmt: skip
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis did not start")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def start_certd(data: Path, ledger_url: str | None) -> tuple[subprocess.Popen[str], str]:
    cfg = {
        "key_name": KEY_NAME,
        "ledger": {"origin": KEY_NAME},
        "countdown": {"verify_workers": 0},
    }
    (data / "config.json").write_text(json.dumps(cfg))
    args = [sys.executable, "-m", "certd.cli", "serve", "--data-dir", str(data),
            "--listen", "127.0.0.1:0", "--config", str(data / "config.json"), "--json"]  # fmt: skip
    if ledger_url:
        args += ["--ledger", ledger_url]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    event = json.loads(proc.stdout.readline())
    return proc, str(event["address"])


def requests() -> list[tuple[dict[str, object], str, str]]:
    return certify_requests(max(50, REQUESTS // 2), seed=77)


def run_config(name: str, replicas: int, use_redis: bool, reqs: list[Any]) -> dict[str, Any]:
    key = SigningKey.generate(KEY_NAME)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        redis = None
        if use_redis:
            (root / "redis").mkdir()
            redis = Redis(root / "redis")
        procs = []
        for i in range(replicas):
            data = root / f"r{i}"
            data.mkdir()
            save_signing_key(data / "signing.key", key)
            procs.append(start_certd(data, redis.url if redis else None))
        addresses = [a for _, a in procs]
        # Warm up each replica (connections, imports) outside the timed window.
        for a in addresses:
            with CertdClient(a) as c:
                c.enumerate_families(reqs[0][0])
        pids = [p.pid for p, _ in procs]
        cpu0 = {pid: cpu_seconds(pid) for pid in pids}
        redis_cpu0 = cpu_seconds(redis.proc.pid) if redis else 0.0
        self_cpu0 = time.process_time()
        t0 = time.perf_counter()
        done, errors = certify_from_clients(addresses, reqs)
        wall = time.perf_counter() - t0
        certd_cpu = sum(cpu_seconds(pid) - cpu0[pid] for pid in pids)
        redis_cpu = (cpu_seconds(redis.proc.pid) - redis_cpu0) if redis else 0.0
        client_cpu = time.process_time() - self_cpu0
        for p, _ in procs:
            p.terminate()
            p.wait(timeout=60)
        if redis:
            redis.stop()
        if errors:
            raise errors[0]
        total = sum(done)
        return {
            "config": name,
            "replicas": replicas,
            "store": "redis" if use_redis else "sqlite",
            "certificates": total,
            "seconds": round(wall, 2),
            "certificates_per_second": round(total / wall, 1),
            **_cpu_shares(total, wall, certd_cpu, redis_cpu, client_cpu),
        }


def certify_from_clients(
    addresses: str | list[str], reqs: list[Any]
) -> tuple[list[int], list[BaseException]]:
    """``CLIENTS`` threads, each certifying its share of ``reqs`` in batches; the certificates
    each got and the errors raised."""
    settings = ClientSettings(timeout_s=300, batch_size=BATCH, wait_for_ready=True)
    work = [reqs[i::CLIENTS] for i in range(CLIENTS)]
    errors: list[BaseException] = []
    done = [0] * CLIENTS

    def client(n: int) -> None:
        try:
            with CertdClient(addresses, settings=settings) as c:
                for start in range(0, len(work[n]), BATCH):
                    results = c.certify_batch(work[n][start : start + BATCH])
                    bad = [r for r in results if isinstance(r, CertificationRefusedError)]
                    assert not bad, bad[:2]
                    done[n] += len(results)
        except BaseException as e:  # noqa: BLE001  # reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done, errors


def _cpu_shares(
    total: int, wall: float, certd_cpu: float, redis_cpu: float, client_cpu: float
) -> dict[str, Any]:
    """CPU per certificate of each process kind, and the share of the machine they used."""
    return {
        "cpu_ms_per_certificate": {
            "certd": round(1e3 * certd_cpu / total, 3),
            "redis": round(1e3 * redis_cpu / total, 3),
            "client": round(1e3 * client_cpu / total, 3),
        },
        "cpu_utilisation_of_machine": round(
            (certd_cpu + redis_cpu + client_cpu) / (wall * (os.cpu_count() or 1)), 2
        ),
    }


def synthetic_certificate(i: int) -> tuple[str, bytes]:
    """A keyed feasibility-certificate entry (unsigned: start-up indexing does not verify)."""
    statement = {
        "predicateType": PREDICATE_FEASIBILITY,
        "predicate": {
            "task_digest": f"{i:064x}", "kappa": "countdown.first-op.v1", "label": "25,-",
            "label_fields": {"operand": "25", "operator": "-"},
            "canonical_digest": f"{i:064x}", "witness": "(25-5)*4+3",
        },
    }  # fmt: skip
    payload = base64.b64encode(json.dumps(statement).encode()).decode()
    envelope = json.dumps({"payload": payload, "payloadType": "application/vnd.in-toto+json"})
    return f"feasibility/{i:064x}/countdown.first-op.v1/25,-", envelope.encode()


def startup_with_certificates(store: RedisStore, data: Path, url: str) -> float:
    """Append CERT_ENTRIES keyed certificates to the 1M-entry ledger, time a replica start."""
    for start in range(0, CERT_ENTRIES, 10_000):
        store.append([synthetic_certificate(i) for i in range(start, start + 10_000)])
    s0 = time.perf_counter()
    proc, _ = start_certd(data, url)
    took = time.perf_counter() - s0
    proc.terminate()
    proc.wait(timeout=60)
    return took


def empty_startup() -> float:
    """Seconds from spawning ``certd serve`` on an empty Redis ledger to serving."""
    key = SigningKey.generate(KEY_NAME)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "redis").mkdir()
        redis = Redis(root / "redis")
        try:
            data = root / "replica"
            data.mkdir()
            save_signing_key(data / "signing.key", key)
            s0 = time.perf_counter()
            proc, _ = start_certd(data, redis.url)
            took = time.perf_counter() - s0
            proc.terminate()
            proc.wait(timeout=60)
        finally:
            redis.stop()
    return took


def percentile(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))]


def _store_proof_ms(store: RedisStore, rng: random.Random, size: int) -> list[float]:
    """Milliseconds of ``PROOF_SAMPLES`` inclusion proofs read straight from the store."""
    out = []
    for _ in range(PROOF_SAMPLES):
        i = rng.randrange(size)
        s0 = time.perf_counter()
        store.batched(lambda f, i=i: inclusion_proof(i, size, f))  # type: ignore[misc]
        out.append(1e3 * (time.perf_counter() - s0))
    return out


def _grpc_proof_ms(address: str, rng: random.Random, size: int) -> list[float]:
    """Milliseconds of ``PROOF_SAMPLES`` GetInclusionProof calls (after 200 to warm up)."""
    out = []
    with CertdClient(address) as c:
        for _ in range(200):
            c.inclusion_proof(rng.randrange(size))  # warm the connection
        for _ in range(PROOF_SAMPLES):
            i = rng.randrange(size)
            s0 = time.perf_counter()
            proof = c.inclusion_proof(i)
            out.append(1e3 * (time.perf_counter() - s0))
            assert proof.leaf_index == i and proof.tree_size == size
    return out


def proof_latency() -> dict[str, Any]:
    key = SigningKey.generate(KEY_NAME)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "redis").mkdir()
        redis = Redis(root / "redis")
        try:
            store = RedisStore(redis.url)
            rng = random.Random(5)
            t0 = time.perf_counter()
            chunk = 10_000
            for _ in range(0, PROOF_ENTRIES, chunk):
                store.append([(None, rng.randbytes(200)) for _i in range(chunk)])
            build_s = time.perf_counter() - t0
            # One checkpoint over the whole tree, signed by the ledger (checks included).
            Ledger(store, key, KEY_NAME).close()
            store2 = RedisStore(redis.url)
            size = store2.size()
            store_lat = _store_proof_ms(store2, rng, size)
            data = root / "replica"
            data.mkdir()
            save_signing_key(data / "signing.key", key)
            s0 = time.perf_counter()
            proc, address = start_certd(data, redis.url)  # reads its index from the ledger
            startup_s = time.perf_counter() - s0
            try:
                grpc_lat = _grpc_proof_ms(address, rng, size)
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            memory = store2.client.info("memory")["used_memory"]
            certs_startup_s = startup_with_certificates(store2, data, redis.url)
            store2.close()
        finally:
            redis.stop()
            shutil.rmtree(root / "redis", ignore_errors=True)
    p99 = percentile(grpc_lat, 0.99)
    return {
        "entries": size,
        "build_seconds": round(build_s, 1),
        "replica_startup_seconds": round(startup_s, 2),
        "replica_startup_seconds_empty_ledger": round(empty_startup(), 2),
        "replica_startup_seconds_plus_certificates": {
            "certificates": CERT_ENTRIES,
            "seconds": round(certs_startup_s, 2),
        },
        "redis_used_memory_mb": round(memory / 2**20, 1),
        "grpc_get_inclusion_proof_ms": {
            "p50": round(percentile(grpc_lat, 0.5), 3),
            "p99": round(p99, 3),
            "samples": len(grpc_lat),
        },
        "store_proof_ms_uncached": {
            "p50": round(percentile(store_lat, 0.5), 3),
            "p99": round(percentile(store_lat, 0.99), 3),
            "samples": len(store_lat),
        },
        "target": {"p99_ms_below": P99_TARGET_MS, "met": p99 < P99_TARGET_MS},
    }


def main() -> None:
    reqs = requests()[:REQUESTS]
    runs = [
        run_config("sqlite-embedded", 1, False, reqs),
        run_config("redis-1-replica", 1, True, reqs),
        run_config("redis-3-replicas", 3, True, reqs),
    ]
    by = {r["config"]: r for r in runs}
    one = by["redis-1-replica"]["certificates_per_second"]
    three = by["redis-3-replicas"]["certificates_per_second"]
    sqlite = by["sqlite-embedded"]["certificates_per_second"]
    proofs = proof_latency()
    write(
        "cluster",
        {
            "clients": CLIENTS,
            "batch": BATCH,
            "throughput": runs,
            "scaling": {
                "three_replicas_over_one": round(three / one, 2),
                "one_replica_redis_over_sqlite": round(one / sqlite, 2),
                "three_replicas_redis_over_sqlite": round(three / sqlite, 2),
            },
            "inclusion_proofs_at_1m": proofs,
            "targets": {
                "inclusion_proof_p99_ms": proofs["target"],
            },
            "note": "2-core machine shared with other work; replicas, Redis and clients share "
            "the cores, so see cpu_ms_per_certificate for where the time goes",
        },
    )


if __name__ == "__main__":
    main()
