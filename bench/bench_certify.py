"""Certificates per second end to end: CertifyBatch over gRPC into the SQLite ledger.

Each request carries a distinct (task, label) with a witness from the enumerator (enumeration
is done before timing). The server verifies each witness, recomputes its label, runs the gate,
signs an in-toto statement in a DSSE envelope, appends it to the ledger with group commit
(synchronous=FULL), signs checkpoints and returns every certificate with its inclusion proof.

The server serves Countdown only (``math.enabled: false``): with the math domain on, the first
half minute of a server's life is its math warm-up (two worker processes start and prime the
LaTeX grammar; the server process imports torch and sentence-transformers for the first-step
model), which takes both cores of a small machine and is what this benchmark measured at
1,615/s (issue 19). ``bench/compare_certify.py`` measures the warm-up window separately.

Run: ``.venv/bin/python bench/bench_certify.py`` → ``bench/results/certify.json``.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from _common import certify_requests, write

from forkgate import CertdClient, CertificationRefusedError
from forkgate.local import LocalCertd

BATCH = 1000
TARGET = 2000.0
SERVER_CONFIG = {"math": {"enabled": False}}
"""Countdown only: what is certified here (see the module notes)."""


def requests(n: int) -> list[tuple[dict[str, object], str, str]]:
    """Distinct (task, label) requests whose witnesses are distinct solutions (none refused)."""
    return certify_requests(n, seed=21)


def main() -> None:
    reqs = requests(2500)
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(SERVER_CONFIG))
        with LocalCertd(Path(tmp) / "d", config=config) as certd:
            address, _ = certd.address, certd.vkey
            with CertdClient(address) as client:
                for start in range(0, len(reqs) - BATCH + 1, BATCH):
                    chunk = reqs[start : start + BATCH]
                    t0 = time.perf_counter()
                    results = client.certify_batch(chunk)
                    rounds.append(time.perf_counter() - t0)
                    refused = [r for r in results if isinstance(r, CertificationRefusedError)]
                    assert not refused, refused[:3]
    rates = sorted(BATCH / s for s in rounds)
    med = rates[len(rates) // 2]
    write(
        "certify",
        {
            "certificates": BATCH * len(rounds),
            "batch": BATCH,
            "server_config": SERVER_CONFIG,
            "per_batch_rates": [round(r, 1) for r in rates],
            "median_certificates_per_second": round(med, 1),
            "target": {"at_least_per_second": TARGET, "met": med >= TARGET},
        },
    )


if __name__ == "__main__":
    main()
