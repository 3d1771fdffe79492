"""A fresh certd's first code checks, at once and after a pause, and what runs beside them.

Run: ``.venv/bin/python bench/profile_fresh_server.py [--backend bwrap] [--rounds 3]`` →
``bench/results/fresh_server.json``.

Each round runs in a process of its own: a certd process starts its forkserver cold, while a
second server in one process would fork its workers from the first one's warm forkserver. It
starts a certd on 127.0.0.1 (``bench/_code.py``'s server, the math domain on, as
``bench_tenants.py`` runs it), checks one HumanEval solution (the pool's first start), waits
``pause`` seconds (0, then 8), and checks the canonical solutions of 40 other tasks one at a
time, each task's first check; a third variant has the math domain off and no pause.
Reported per round: p50 and mean latency of those 40, and the CPU seconds the server's
forkserver and its children (the math pool's and the verify pool's workers) used meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _code import code_server, code_task, human_eval_problems
from _common import write
from _quiet import own_cpu_s

from forkgate import CertdClient, ClientSettings

CHECKS = 40
VARIANTS = ((0.0, True), (8.0, True), (0.0, False))  # (pause, math domain on)


def _forkservers() -> list[int]:
    """The forkserver processes (math and verify pool workers are their children)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"multiprocessing.forkserver" in cmd and ppid == os.getpid():
            found.append(int(name))
    return found


def _workers_cpu_s() -> float:
    return sum(own_cpu_s(pid, engine=False) for pid in _forkservers())


def one_round(
    backend: str, pause: float, math: bool, probs: list[dict[str, Any]]
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        srv = code_server(backend, Path(tmp), pool=2, cpu_s=3.0, wall_s=6.0, math=math)
        try:
            address = f"127.0.0.1:{srv.port}"
            with CertdClient(address, settings=ClientSettings(timeout_s=900)) as c:
                c.verify(code_task(probs[0]), probs[0]["canonical_solution"])
                time.sleep(pause)
                lat, cpu_before = [], _workers_cpu_s()
                for p in probs[1 : CHECKS + 1]:
                    t0 = time.perf_counter()
                    c.verify(code_task(p), p["canonical_solution"])
                    lat.append(time.perf_counter() - t0)
                workers_cpu = _workers_cpu_s() - cpu_before
        finally:
            srv.stop(grace_s=1.0)
    return {
        "pause_s": pause,
        "math": math,
        "p50_ms": round(statistics.median(lat) * 1e3, 1),
        "mean_ms": round(statistics.mean(lat) * 1e3, 1),
        "checks_s": round(sum(lat), 2),
        "forkserver_workers_cpu_s_meanwhile": round(workers_cpu, 2),
    }


def _in_child(backend: str, pause: float, math: bool) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--backend", backend, "--round", f"{pause:g}", str(int(math))]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("bwrap", "docker"), default="bwrap")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--round", nargs=2, metavar=("PAUSE", "MATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.round:  # one round, in this fresh process
        pause, math = float(args.round[0]), args.round[1] == "1"
        result = one_round(args.backend, pause, math, human_eval_problems(CHECKS + 1))
        print(json.dumps(result), flush=True)
        os._exit(0)  # the stopped server's gRPC threads can abort the interpreter's exit
    rounds = [
        _in_child(args.backend, pause, math) for _ in range(args.rounds) for pause, math in VARIANTS
    ]
    summary = {
        f"pause_{pause:g}s_math_{'on' if math else 'off'}_p50_ms_median": statistics.median(
            r["p50_ms"] for r in rounds if (r["pause_s"], r["math"]) == (pause, math)
        )
        for pause, math in VARIANTS
    }
    write("fresh_server", {"backend": args.backend, "rounds": rounds, **summary})


if __name__ == "__main__":
    main()
