"""Start-up proof of the store: how long `certd serve` takes to start on a 1,000,000-entry log.

Builds a data dir like ``certd serve`` leaves it (``ledger.sqlite``, ``signing.key``) with N
DSSE-enveloped statements (``bench_ledger.envelopes``), then times three starts:

* the first ``Ledger`` open without a "verified up to" mark: every row re-read and re-hashed,
  every node compared (``certd.ledger.startup_check``);
* a ``Ledger`` open from the mark that first start left (the usual restart: the verified
  prefix's rows are re-read in one pass and their block digests compared with the mark's);
* a whole ``CertdServer`` (``certd serve``'s object) started and stopped from the mark.

Run: ``.venv/bin/python bench/bench_startup.py [--entries N]`` → ``bench/results/startup.json``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from _common import write
from bench_ledger import envelopes

from certd.config import CertdConfig
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.service.server import CertdServer
from certd.signing.keys import SigningKey, save_signing_key


def _open_s(data: Path, key: SigningKey) -> tuple[float, float]:
    """Wall and CPU seconds of one ``Ledger`` open (CPU time: what the load inflates less)."""
    t0, c0 = time.perf_counter(), time.process_time()
    store = SQLiteStore(data / "ledger.sqlite")
    Ledger(store, key, key.name, verified_mark=data / "ledger.verified").close()
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    n = parser.parse_args().entries
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "certd-data"
        data.mkdir()
        key = SigningKey.generate("forkgate.local/certd")  # the default key name and origin
        save_signing_key(data / "signing.key", key)
        distinct = envelopes(key, 1000)
        store = SQLiteStore(data / "ledger.sqlite", synchronous="NORMAL")
        for start in range(0, n, 10_000):
            store.append([(None, distinct[i % 1000]) for i in range(start, min(n, start + 10_000))])
        store.close()
        load = os.getloadavg()[0]
        first_s = _open_s(data, key)
        again_s = _open_s(data, key)
        cfg = CertdConfig(data_dir=data, listen="127.0.0.1:0")
        t0, c0 = time.perf_counter(), time.process_time()
        server = CertdServer(cfg)
        server.start()
        serve_s, serve_cpu = time.perf_counter() - t0, time.process_time() - c0
        load_after = os.getloadavg()[0]
        server.stop(grace_s=1)
    write(
        "startup",
        {
            "entries": n,
            "first_open_full_proof_seconds": round(first_s[0], 2),
            "first_open_full_proof_cpu_seconds": round(first_s[1], 2),
            "open_from_mark_seconds": round(again_s[0], 2),
            "open_from_mark_cpu_seconds": round(again_s[1], 2),
            "certd_server_start_from_mark_seconds": round(serve_s, 2),
            "certd_server_start_from_mark_cpu_seconds": round(serve_cpu, 2),
            "loadavg_1m_before": round(load, 2),
            "loadavg_1m_after": round(load_after, 2),
            "targets": {"start_1m_seconds_under": 10.0, "met": n >= 1_000_000 and serve_s < 10.0},
        },
    )


if __name__ == "__main__":
    main()
