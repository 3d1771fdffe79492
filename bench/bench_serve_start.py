"""A ``certd serve`` start, from spawn to its ``serving`` line, and its CPU until it has stopped.

Each start is a fresh process on a fresh data dir (embedded SQLite, math on first use, no
Countdown pool: the test servers' settings) stopped with SIGTERM as soon as it serves; the CPU
is the child's, read from ``RUSAGE_CHILDREN`` once it is reaped. With several ``--tree``
checkouts the starts interleave (A, B, A, B, …) so each pair sees the same machine load, and
the result holds each tree's medians and the ratio to the first tree.

Run: ``.venv/bin/python bench/bench_serve_start.py --tree base=/tmp/base --tree new=. --runs 7``
→ ``bench/results/serve_start.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import median, write

CONFIG = {"math": {"warm_start": False, "prime_grammar": False}, "countdown": {"verify_workers": 0}}


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_start(tree: Path, scratch: Path) -> tuple[float, float]:
    """(seconds to the serving line, CPU seconds of the process) of one start in ``tree``."""
    folder = Path(tempfile.mkdtemp(dir=scratch))
    (folder / "config.json").write_text(json.dumps(CONFIG))
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "certd.cli", "serve",
            "--data-dir", str(folder / "data"), "--listen", "127.0.0.1:0",
            "--config", str(folder / "config.json"), "--json",
        ],
        cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    serving = time.perf_counter() - t0
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:  # a certd before ed84e60 could sleep through SIGTERM
        proc.kill()
        proc.wait()
    if json.loads(line or "{}").get("event") != "serving":
        raise RuntimeError(f"certd serve in {tree} did not serve: {line!r}")
    return serving, _children_cpu() - cpu0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", action="append", default=[], help="NAME=PATH of a checkout")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree) or {"here": "."}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.runs):
            for name, path in trees.items():
                runs[name].append(one_start(Path(path).resolve(), Path(scratch)))
    first = next(iter(trees))
    result = {}
    for name, rows in runs.items():
        result[name] = {
            "serving_s_median": median([r[0] for r in rows]),
            "cpu_s_median": median([r[1] for r in rows]),
            "runs": rows,
        }
    for name in trees:
        base = result[first]
        result[name]["cpu_ratio_to_" + first] = (
            result[name]["cpu_s_median"] / base["cpu_s_median"]  # type: ignore[operator]
        )
    write("serve_start", {"config": CONFIG, "trees": trees, "result": result})


if __name__ == "__main__":
    main()
