"""Where a certificate's time goes on the Redis path, next to the SQLite path, in one process.

The certd parts a CertifyBatch runs (``Authority.certify_batch``, whose certificates come back
with their inclusion proofs, then each one's wire message, as ``certd.service.authority``
encodes it) over a ledger on SQLite and on a real ``redis-server`` (``appendfsync always``),
with every Redis command and pipeline counted, and cProfile in the serving thread and in the
(first) ledger's committer thread. A third run puts three replicas (three ledgers and
authorities on one Redis prefix) in the one process, batches round robin over them, to show
what a cluster adds per certificate.

Run: ``.venv/bin/python bench/profile_cluster_path.py`` → ``bench/results/cluster_path.json``
and the top functions of each profile on stdout.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis
from _common import certify_requests, write
from bench_cluster import Redis

from certd.authority.checker import Checkers
from certd.authority.feasibility import Authority, CertifyRequest
from certd.config import CertdConfig, CountdownConfig
from certd.ledger.groupcommit import Committer
from certd.ledger.log import Ledger
from certd.ledger.store import LedgerStore
from certd.ledger.store.redis import RedisStore
from certd.ledger.store.sqlite import SQLiteStore
from certd.service.convert import certificate_to_pb, checked_task
from certd.signing.keys import SigningKey
from certd.v1 import authority_pb2
from forkgate._base import certify_request

KEY = "forkgate.bench/path"
BATCH = 50
N = 1500
COMMANDS: Counter[str] = Counter()


def count_commands() -> None:
    """Count every Redis command (pipelines count once, as one round trip)."""
    plain = redis.Redis.execute_command
    piped = redis.client.Pipeline.execute

    def execute_command(self: Any, *args: Any, **kw: Any) -> Any:
        name = str(args[0])
        if name == "EVALSHA":
            name = f"EVALSHA:{str(args[1])[:8]}"
        COMMANDS[name] += 1
        return plain(self, *args, **kw)

    def execute(self: Any, *args: Any, **kw: Any) -> Any:
        COMMANDS["PIPELINE"] += 1
        return piped(self, *args, **kw)

    redis.Redis.execute_command = execute_command  # type: ignore[method-assign]
    redis.client.Pipeline.execute = execute  # type: ignore[method-assign]


def profiled_ledger(store: LedgerStore, key: SigningKey, committer: cProfile.Profile) -> Ledger:
    """A ledger whose committer thread runs under ``committer``."""
    loop = Committer._loop

    def run(self: Committer) -> None:
        committer.enable()
        try:
            loop(self)
        finally:
            committer.disable()

    Committer._loop = run  # type: ignore[method-assign]
    try:
        return Ledger(store, key, KEY)
    finally:
        Committer._loop = loop  # type: ignore[method-assign]


def run(name: str, stores: list[LedgerStore], reqs: list[Any]) -> dict[str, Any]:
    """Certify ``reqs`` in batches, round robin over one replica (ledger + authority) per
    store; several stores on one Redis are replicas of one cluster in this process."""
    cfg = CertdConfig(countdown=CountdownConfig(verify_workers=0))
    key = SigningKey.generate(KEY)
    committer = cProfile.Profile()
    ledgers = [profiled_ledger(store, key, committer) for store in stores[:1]]
    ledgers += [Ledger(store, key, KEY) for store in stores[1:]]
    authorities = [Authority(Checkers(cfg), ledger, key) for ledger in ledgers]
    pbs = [certify_request(t, label, w) for t, label, w in reqs]
    serving = cProfile.Profile()
    COMMANDS.clear()
    cpu0, t0 = time.process_time(), time.perf_counter()
    serving.enable()
    for n, start in enumerate(range(0, len(pbs), BATCH)):
        authority = authorities[n % len(ledgers)]
        chunk: list[authority_pb2.CertifyRequest] = pbs[start : start + BATCH]
        requests = [
            CertifyRequest(
                checked_task(r.task, cfg, "task"),
                r.label.kappa or "countdown.first-op.v1",
                r.label.value,
                r.witness,
            )
            for r in chunk
        ]
        for outcome in authority.certify_batch(requests):
            assert outcome.certificate is not None
            certificate_to_pb(outcome.certificate)
    serving.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    for ledger in ledgers:
        ledger.close()
    commands = dict(COMMANDS)
    out = {
        "store": name,
        "certificates": len(pbs),
        "cpu_ms_per_certificate_certd": round(1e3 * cpu / len(pbs), 3),
        "wall_ms_per_certificate": round(1e3 * wall / len(pbs), 3),
        "redis_round_trips_per_certificate": round(sum(commands.values()) / len(pbs), 2),
        "redis_commands": dict(sorted(commands.items(), key=lambda kv: -kv[1])),
    }
    for label, prof in (("serving", serving), ("committer", committer)):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(18)
        print(f"== {name} {label}\n{s.getvalue()[:4000]}")
    return out


def main() -> None:
    count_commands()
    reqs = certify_requests(N, seed=91)[:N]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sqlite = run("sqlite", [SQLiteStore(root / "ledger.db")], reqs)
        (root / "redis").mkdir()
        server = Redis(root / "redis")
        try:
            redis_run = run("redis", [RedisStore(server.url)], reqs)
            replicas: list[LedgerStore] = [RedisStore(server.url, prefix="r3") for _ in range(3)]
            three = run("redis-3-replicas", replicas, reqs)
        finally:
            server.stop()
    ratio = redis_run["cpu_ms_per_certificate_certd"] / sqlite["cpu_ms_per_certificate_certd"]
    write(
        "cluster_path",
        {
            "batch": BATCH,
            "runs": [sqlite, redis_run, three],
            "redis_over_sqlite_cpu_per_certificate": round(ratio, 2),
            "note": "one process, no gRPC; serving thread and committer profiled; the machine "
            "is shared with other work (CPU figures, not wall times, are the ones to compare)",
        },
    )


if __name__ == "__main__":
    threading.current_thread().name = "serving"
    main()
