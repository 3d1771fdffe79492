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
