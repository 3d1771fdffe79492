"""Shared helpers for the benchmarks: timing, machine facts, JSON results, a certd process."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """Facts about the machine the numbers come from."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def timed_runs(fn: Callable[[], Any], repeats: int) -> list[float]:
    """Wall seconds of ``repeats`` calls of ``fn``."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def write(name: str, result: dict[str, Any]) -> Path:
    """Write ``bench/results/NAME.json`` and print it."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    result = {"benchmark": name, "machine": machine(), **result}
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return path


def certify_requests(n: int, seed: int) -> list[tuple[dict[str, object], str, str]]:
    """Distinct (task, label, witness) Certify requests from ``n`` generated puzzles.

    Witnesses are enumerated before any timing, one per family and never the same solution
    twice for a task, so certd refuses none of them (no pseudo-forks, no repeated tasks).
    """
    from certd.domains import countdown as cd
    from forkgate.puzzles import countdown_puzzles

    out: list[tuple[dict[str, object], str, str]] = []
    seen_tasks: set[tuple[tuple[int, ...], int]] = set()
    for p in countdown_puzzles(n, seed=seed):
        task = cd.CountdownTask(numbers=tuple(p["numbers"]), target=int(p["target"]))
        if (tuple(sorted(task.numbers)), task.target) in seen_tasks:
            continue
        seen_tasks.add((tuple(sorted(task.numbers)), task.target))
        found = cd.enumerate_families(task)
        solutions: set[str] = set()
        for fam in found.families:
            lw = found.labels[fam[0]]
            canonical = cd.canonical_form(cd.parse_expression(lw.witness))
            if canonical not in solutions:
                solutions.add(canonical)
                out.append((p, f"{lw.operand},{lw.operator}", lw.witness))
    return out
