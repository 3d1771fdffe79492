"""CPU-seconds per 1,000 Countdown verdicts through ``VerifyBatch``: server, workers, client.

For comparing two trees of certd on a loaded machine (CPU time moves less than wall time):
run it from each tree's root in turn, interleaved, e.g.::

    for i in 1 2 3 4; do for t in /tmp/base /tmp/branch; do
      (cd $t && PYTHONPATH=. /path/to/.venv/bin/python /path/to/bench/bench_verify_cpu.py 3)
    done; done

Each run starts a fresh ``certd serve`` (math off), warms it with three batches, then times
ROUNDS blocks of 10 batches of 1,000 (the answers of ``bench_verify.py``). It prints one JSON
list, a record per block; it writes no results file.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil
from bench_verify import answers

from forkgate import CertdClient, VerifyItem
from forkgate.local import LocalCertd


def cpu_s(process: psutil.Process) -> float:
    """User + system CPU seconds of a process and all its descendants (the workers)."""
    total = sum(process.cpu_times()[:2])
    for child in process.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def main(rounds: int) -> None:
    import certd

    print(f"certd from {os.path.dirname(certd.__file__)}", file=sys.stderr)
    pairs = answers()
    items = [VerifyItem(p, f"<answer>{a}</answer>", str(i)) for i, (p, a) in enumerate(pairs)]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps({"math": {"enabled": False}}))
        with LocalCertd(Path(tmp) / "data", config=config) as server:
            process = psutil.Process(server.process.pid)
            with CertdClient(server.address) as client:
                for _ in range(3):
                    client.verify_batch(items[:1000])
                for _ in range(rounds):
                    s0, c0, w0 = cpu_s(process), time.process_time(), time.perf_counter()
                    for _ in range(5):
                        client.verify_batch(items[:1000])
                        client.verify_batch(items[1000:2000])
                    s1, c1, w1 = cpu_s(process), time.process_time(), time.perf_counter()
                    out.append(
                        {
                            "server_cpu_per_1000": (s1 - s0) / 10,
                            "client_cpu_per_1000": (c1 - c0) / 10,
                            "wall_per_1000": (w1 - w0) / 10,
                            "loadavg": os.getloadavg()[0],
                        }
                    )
    print(json.dumps(out))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
