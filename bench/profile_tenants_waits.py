"""Where the honest tail of ``bench_tenants.py`` comes from: waits for a worker vs the run.

Run: ``.venv/bin/python bench/profile_tenants_waits.py [--backend docker]`` →
``bench/results/tenants_waits_BACKEND.json``.

Runs one backend's phase of ``bench_tenants.py`` (alone, then beside the hostile batch) with
``WarmPool`` instrumented in this process (certd runs in it): for every check, the time it
waited for a worker and its whole time in the pool; for every worker start, when it began.
Reports how many honest checks waited more than 10 ms and the slowest honest checks with their
wait and the worker starts in the 1.5 s before them (a container start loads the host).
Diagnostic only: the instrumentation wraps the pool's methods and adds microseconds a check.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_tenants
from _common import write

from sandboxes import pool as poolmod

WAITED_S = 0.010
SLOWEST = 15


class _Recorder:
    """Wraps ``WarmPool._acquire``, ``run`` and ``_spawn`` to record waits, runs and starts."""

    def __init__(self) -> None:
        self.checks: list[tuple[float, float, float, str]] = []  # start, total, wait, key
        self.starts: list[float] = []
        self._local = threading.local()

    def install(self) -> None:
        acquire, run, spawn = (
            poolmod.WarmPool._acquire,
            poolmod.WarmPool.run,
            poolmod.WarmPool._spawn,
        )
        rec = self

        def _acquire(pool: Any, key: Any, cancel: Any) -> Any:
            t0 = time.perf_counter()
            worker = acquire(pool, key, cancel)
            rec._local.wait = time.perf_counter() - t0
            return worker

        def _run(pool: Any, program: Any, limits: Any = None, **kw: Any) -> Any:
            t0 = time.perf_counter()
            rec._local.wait = 0.0
            try:
                return run(pool, program, limits, **kw)
            finally:
                total = time.perf_counter() - t0
                rec.checks.append((t0, total, rec._local.wait, repr(kw.get("key"))))

        def _spawn(pool: Any, *args: Any, **kw: Any) -> None:
            rec.starts.append(time.perf_counter())
            spawn(pool, *args, **kw)

        poolmod.WarmPool._acquire = _acquire  # type: ignore[method-assign]
        poolmod.WarmPool.run = _run  # type: ignore[method-assign]
        poolmod.WarmPool._spawn = _spawn  # type: ignore[method-assign]

    def report(self) -> dict[str, Any]:
        """The honest checks (one check per request key; the hostile batch's keys repeat)."""
        per_key = collections.Counter(key for *_, key in self.checks)
        honest = sorted((c for c in self.checks if per_key[c[3]] == 1), key=lambda c: -c[1])
        t0 = min(c[0] for c in self.checks)
        slowest = [
            {
                "at_s": round(start - t0, 2),
                "total_ms": round(total * 1e3, 1),
                "wait_ms": round(wait * 1e3, 1),
                "worker_starts_before_s": [
                    round(s - start, 2) for s in self.starts if -1.5 < s - start < total
                ],
            }
            for start, total, wait, _ in honest[:SLOWEST]
        ]
        return {
            "honest_checks": len(honest),
            "honest_waits_over_10ms": sum(1 for c in honest if c[2] > WAITED_S),
            "worker_starts": len(self.starts),
            "slowest_honest": slowest,
            "note": "the first check (at_s 0) is the pool's first start, untimed by bench_tenants",
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("bwrap", "docker"), default="docker")
    args = ap.parse_args()
    rec = _Recorder()
    rec.install()
    with tempfile.TemporaryDirectory() as tmp:
        run = bench_tenants.backend_run(args.backend, bench_tenants.problems(), Path(tmp))
    out = {"backend": args.backend, **rec.report()}
    out["bench_tenants"] = {k: run[k] for k in ("alone", "beside_hostile", "p99_beside_over_alone")}
    write(f"tenants_waits_{args.backend}", out)


if __name__ == "__main__":
    main()
