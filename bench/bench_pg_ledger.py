"""CPU per certificate: one certd replica on PostgreSQL (primary + synchronous standby) against
the embedded SQLite store, in the same run.

Each configuration is a real ``certd serve`` on 127.0.0.1 (``--ledger postgresql://…`` for
PostgreSQL, Debian's PostgreSQL 15 started in a temp dir as in ``tests/pg_helpers.py``, with a
streaming standby named in ``synchronous_standby_names``). Client threads send CertifyBatch
(distinct (task, label) pairs); the CPU of certd (with its children), of both PostgreSQL
servers (postmaster and backends, reaped ones included) and of this client process is read
from /proc before and after.

Run: ``.venv/bin/python bench/bench_pg_ledger.py`` → ``bench/results/pg_ledger.json``
(``BENCH_PG_REQUESTS``, default 1500 certificates per configuration).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import certify_requests, write
from bench_cluster import KEY_NAME, cpu_seconds

from certd.signing.keys import SigningKey, save_signing_key
from forkgate import CertdClient, CertificationRefusedError
from forkgate._base import ClientSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pg_helpers import PgServer, remove_root  # the tests' PostgreSQL harness

CLIENTS = 6
BATCH = 50
REQUESTS = int(os.environ.get("BENCH_PG_REQUESTS", "1500"))


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
    args = [sys.executable, "-m", "certd.cli", "serve", "--data-dir", str(data),
            "--listen", "127.0.0.1:0", "--config", str(data / "config.json"), "--json"]  # fmt: skip
    if ledger_url:
        args += ["--ledger", ledger_url]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    event = json.loads(proc.stdout.readline())
    return proc, str(event["address"])


def certify(addresses: list[str], reqs: list[Any]) -> tuple[int, float]:
    """Certify ``reqs`` from ``CLIENTS`` threads; (certificates, wall seconds)."""
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
        except BaseException as e:  # noqa: BLE001  # reported below
            errors.append(e)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sum(done), time.perf_counter() - t0


def run(store: str, reqs: list[Any]) -> dict[str, Any]:
    """One replica on ``store`` (``sqlite`` or ``postgres``); its figures."""
    key = SigningKey.generate(KEY_NAME)
    servers: list[PgServer] = []
    pg_root = PgServer.make_root() if store == "postgres" else None
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "r0"
        data.mkdir()
        save_signing_key(data / "signing.key", key)
        url = None
        if pg_root is not None:
            primary = PgServer(pg_root).init(synchronous_standby="standby").start()
            standby = primary.standby("standby")
            primary.wait_synchronous("standby")
            servers = [primary, standby]
            url = primary.url(standby)
        proc, address = start_certd(data, url)
        try:
            with CertdClient(address) as c:  # warm up outside the timed window
                c.enumerate_families(reqs[0][0])
            time.sleep(2.0)  # let start-up work finish
            pids = [proc.pid] + [s.proc.pid for s in servers if s.proc is not None]
            cpu0 = {pid: cpu_seconds(pid) for pid in pids}
            self0 = time.process_time()
            total, wall = certify([address], reqs)
            cpu = {pid: cpu_seconds(pid) - cpu0[pid] for pid in pids}
            client_cpu = time.process_time() - self0
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            for s in servers:
                s.stop()
            if pg_root is not None:
                remove_root(pg_root)
    certd_cpu = cpu[proc.pid]
    store_cpu = sum(v for pid, v in cpu.items() if pid != proc.pid)
    return {
        "store": store,
        "certificates": total,
        "seconds": round(wall, 2),
        "certificates_per_second": round(total / wall, 1),
        "cpu_ms_per_certificate": {
            "certd": round(1e3 * certd_cpu / total, 3),
            "store_servers": round(1e3 * store_cpu / total, 3),
            "certd_and_store": round(1e3 * (certd_cpu + store_cpu) / total, 3),
            "client": round(1e3 * client_cpu / total, 3),
        },
    }


def main() -> None:
    reqs = certify_requests(max(50, REQUESTS // 2), seed=77)[:REQUESTS]
    sqlite = run("sqlite", reqs)
    pg = run("postgres", reqs)
    ratio = (
        pg["cpu_ms_per_certificate"]["certd_and_store"]
        / sqlite["cpu_ms_per_certificate"]["certd_and_store"]
    )
    certd_ratio = pg["cpu_ms_per_certificate"]["certd"] / sqlite["cpu_ms_per_certificate"]["certd"]
    write(
        "pg_ledger",
        {
            "runs": [sqlite, pg],
            "postgres_over_sqlite_cpu_per_certificate": round(ratio, 3),
            "postgres_over_sqlite_certd_cpu_per_certificate": round(certd_ratio, 3),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "targets": {"cpu_ratio_under": 1.5, "met": ratio < 1.5},
        },
    )


if __name__ == "__main__":
    main()
