"""CPU per certificate: one certd replica on PostgreSQL (primary + synchronous standby) against
the embedded SQLite store, in the same run, in interleaved rounds.

Each configuration is a real ``certd serve`` on 127.0.0.1 (``--ledger postgresql://…`` for
PostgreSQL, Debian's PostgreSQL 15 started in a temp dir as in ``tests/pg_helpers.py``, with a
streaming standby named in ``synchronous_standby_names``). Both run side by side for the whole
bench; each round certifies a fresh slice of requests on each (which goes first alternates),
from client threads sending CertifyBatch (distinct (task, label) pairs). Per round, the CPU of
certd (with its children), of both PostgreSQL servers (postmaster and backends, reaped ones
included) and of this client process is read from /proc before and after, and the primary's
``pg_stat_statements`` (statements = round trips; ``append_batch`` calls = group commits)
and WAL position (bytes written and streamed to the standby) give the store traffic per
certificate. The figures reported are the medians over rounds, the ratios the medians of the
per-round ratios; the stored bytes per entry and per batch reply close the run.

Run: ``.venv/bin/python bench/bench_pg_ledger.py`` → ``bench/results/pg_ledger.json``
(``BENCH_PG_REQUESTS`` certificates per round and configuration, default 1000;
``BENCH_PG_ROUNDS``, default 5).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import certify_requests, write
from bench_cluster import BATCH, CLIENTS, KEY_NAME, certify_from_clients, cpu_seconds

from certd.signing.keys import SigningKey, save_signing_key

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pg_helpers import PgServer, remove_root  # the tests' PostgreSQL harness

REQUESTS = int(os.environ.get("BENCH_PG_REQUESTS", "1000"))
ROUNDS = int(os.environ.get("BENCH_PG_ROUNDS", "5"))
PROFILE = os.environ.get("BENCH_PG_PROFILE", "")  # a path prefix: profile certd (slower)
_STATS = (
    "SELECT coalesce(sum(calls), 0),"
    " coalesce(sum(calls) FILTER (WHERE query ILIKE 'SELECT%append_batch%'), 0),"
    " pg_current_wal_lsn() - '0/0'::pg_lsn FROM pg_stat_statements"
    " WHERE query NOT ILIKE '%pg_stat_statements%'"
)

_BY_QUERY = (
    "SELECT calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) FROM pg_stat_statements"
    " WHERE query NOT ILIKE '%pg_stat_statements%'"
    " AND query NOT ILIKE '%pg_current_wal_lsn%' ORDER BY calls DESC LIMIT 20"
)

_ROW_BYTES = (
    "SELECT (SELECT avg(octet_length(data))::int FROM certd.entries),"
    " (SELECT coalesce(avg(pg_column_size(resp)), 0)::int FROM certd.requests"
    "  WHERE state = 'done'), (SELECT count(*) FROM certd.requests WHERE state = 'done')"
)


def start_certd(data: Path, ledger_url: str | None) -> tuple[subprocess.Popen[str], str]:
    """``certd serve`` on 127.0.0.1:0 without the math domain (its warm-up would spend CPU in
    the timed window: this bench measures the certify path and the store)."""
    cfg = {
        "key_name": KEY_NAME,
        "ledger": {"origin": KEY_NAME},
        "countdown": {"verify_workers": 0},
        "math": {"enabled": False},
    }
    (data / "config.json").write_text(json.dumps(cfg))
    launch = [sys.executable, "-m", "certd.cli"]
    if PROFILE:  # a CPU profile of every certd thread, written at exit
        here = Path(__file__).resolve().parent
        launch = [sys.executable, str(here / "_profiled_certd.py"), f"{PROFILE}.{data.name}"]
    args = [*launch, "serve", "--data-dir", str(data),
            "--listen", "127.0.0.1:0", "--config", str(data / "config.json"), "--json"]  # fmt: skip
    if ledger_url:
        args += ["--ledger", ledger_url]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    event = json.loads(proc.stdout.readline())
    return proc, str(event["address"])


def certify(address: str, reqs: list[Any]) -> tuple[int, float]:
    """Certify ``reqs`` from ``CLIENTS`` threads (bench_cluster's clients); (certificates, wall
    seconds)."""
    t0 = time.perf_counter()
    done, errors = certify_from_clients(address, reqs)
    if errors:
        raise errors[0]
    return sum(done), time.perf_counter() - t0


class Replica:
    """One ``certd serve`` on ``store`` (``sqlite`` or ``postgres``, with its two servers)."""

    def __init__(self, store: str, tmp: Path) -> None:
        self.store = store
        self.servers: list[PgServer] = []
        self.pg_root = PgServer.make_root() if store == "postgres" else None
        data = tmp / store
        data.mkdir()
        save_signing_key(data / "signing.key", SigningKey.generate(KEY_NAME))
        url = None
        if self.pg_root is not None:
            primary = PgServer(self.pg_root).init(synchronous_standby="standby")
            with (primary.data / "postgresql.conf").open("a") as f:
                f.write("shared_preload_libraries = 'pg_stat_statements'\n")
            primary.start()
            standby = primary.standby("standby")
            primary.wait_synchronous("standby")
            primary.sql("CREATE EXTENSION pg_stat_statements")
            self.servers = [primary, standby]
            url = primary.url(standby)
        self.proc, self.address = start_certd(data, url)

    def warm(self, reqs: list[Any]) -> None:
        """One batch outside the timed rounds (connections, first appends, caches)."""
        certify(self.address, reqs)
        if self.servers:
            self.servers[0].sql("SELECT pg_stat_statements_reset()")

    def statements(self, certificates: int) -> dict[str, float]:
        """Calls per certificate of each statement on the primary since ``warm``."""
        if not self.servers:
            return {}
        rows = self.servers[0].sql(_BY_QUERY).splitlines()
        out = {}
        for row in rows:
            calls, query = row.split("|", 1)
            out[query] = round(int(calls) / certificates, 4)
        return out

    def row_bytes(self) -> dict[str, int]:
        """Mean stored bytes per ledger entry and per idempotency reply (as stored: TOAST
        compressed), over the whole ledger."""
        if not self.servers:
            return {}
        entry, reply, replies = self.servers[0].sql(_ROW_BYTES).split("|")
        return {"entry": int(entry), "batch_reply": int(reply), "batch_replies": int(replies)}

    def store_counters(self) -> tuple[int, int, int]:
        """(statements, appends, WAL bytes) on the primary so far; zeros for SQLite."""
        if not self.servers:
            return 0, 0, 0
        calls, tx, wal = self.servers[0].sql(_STATS).split("|")
        return int(calls), int(tx), int(float(wal))

    def round(self, reqs: list[Any]) -> dict[str, float]:
        """Certify ``reqs``; this round's figures per certificate."""
        pids = [self.proc.pid] + [s.proc.pid for s in self.servers if s.proc is not None]
        counters0 = self.store_counters()
        cpu0 = {pid: cpu_seconds(pid) for pid in pids}
        self0 = time.process_time()
        total, wall = certify(self.address, reqs)
        cpu = {pid: cpu_seconds(pid) - cpu0[pid] for pid in pids}
        client_cpu = time.process_time() - self0
        counters = [b - a for a, b in zip(counters0, self.store_counters(), strict=True)]
        certd_cpu = cpu[self.proc.pid]
        store_cpu = sum(v for pid, v in cpu.items() if pid != self.proc.pid)
        return {
            "certificates": total,
            "certificates_per_second": total / wall,
            "certd": 1e3 * certd_cpu / total,
            "store_servers": 1e3 * store_cpu / total,
            "certd_and_store": 1e3 * (certd_cpu + store_cpu) / total,
            "client": 1e3 * client_cpu / total,
            # the bench's own two stats queries per round are not counted
            "statements": (counters[0] - 2 * bool(self.servers)) / total,
            "group_commits": counters[1] / total,
            "wal_bytes": counters[2] / total,
        }

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        for s in self.servers:
            s.stop()
        if self.pg_root is not None:
            remove_root(self.pg_root)


@contextmanager
def replicas(tmp: Path) -> Iterator[dict[str, Replica]]:
    started: dict[str, Replica] = {}
    try:
        for store in ("sqlite", "postgres"):
            started[store] = Replica(store, tmp)
        yield started
    finally:
        for r in started.values():
            r.stop()


def summary(rounds: list[dict[str, float]]) -> dict[str, Any]:
    """Medians over rounds."""
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    return {
        "certificates_per_round": int(med["certificates"]),
        "rounds": len(rounds),
        "certificates_per_second": round(med["certificates_per_second"], 1),
        "cpu_ms_per_certificate": {
            k: round(med[k], 3) for k in ("certd", "store_servers", "certd_and_store", "client")
        },
        "store_per_certificate": {
            "statements": round(med["statements"], 3),
            "group_commits": round(med["group_commits"], 4),
            "wal_bytes": round(med["wal_bytes"]),
        },
    }


def main() -> None:
    needed, puzzles = REQUESTS * (ROUNDS + 1), REQUESTS * (ROUNDS + 1) // 2
    reqs = certify_requests(puzzles, seed=77)
    while len(reqs) < needed:  # a puzzle gives one request per family: about 1.5
        puzzles = puzzles * needed // len(reqs) + 50
        reqs = certify_requests(puzzles, seed=77)
    per: dict[str, list[dict[str, float]]] = {"sqlite": [], "postgres": []}
    with tempfile.TemporaryDirectory() as tmp, replicas(Path(tmp)) as reps:
        for r in reps.values():
            r.warm(reqs[: BATCH * CLIENTS])
        for n in range(ROUNDS):
            chunk = reqs[(n + 1) * REQUESTS : (n + 2) * REQUESTS]
            order = ["sqlite", "postgres"] if n % 2 == 0 else ["postgres", "sqlite"]
            for store in order:
                per[store].append(reps[store].round(chunk))
        total = sum(int(r["certificates"]) for r in per["postgres"])
        by_query = reps["postgres"].statements(total)
        row_bytes = reps["postgres"].row_bytes()
    pairs = list(zip(per["sqlite"], per["postgres"], strict=True))
    ratios = [p["certd_and_store"] / s["certd_and_store"] for s, p in pairs]
    certd_ratios = [p["certd"] / s["certd"] for s, p in pairs]
    ratio = statistics.median(ratios)
    write(
        "pg_ledger",
        {
            "runs": [{"store": k, **summary(v)} for k, v in per.items()],
            "postgres_over_sqlite_cpu_per_certificate": round(ratio, 3),
            "postgres_over_sqlite_certd_cpu_per_certificate": round(
                statistics.median(certd_ratios), 3
            ),
            "per_round_ratios": [round(x, 3) for x in ratios],
            "postgres_statements_per_certificate": by_query,
            "postgres_stored_bytes": row_bytes,
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "targets": {"cpu_ratio_under": 1.5, "met": ratio < 1.5},
        },
    )


if __name__ == "__main__":
    main()
