"""One certd side of ``bench_math.py`` (default config), to compare two commits' servers.

Run from a directory whose ``certd/`` package the server should use (``python -m certd.cli``
puts the working directory first on its path), e.g. the branch base::

    git archive 1f5ed20 certd | tar -x -C /tmp/base && cd /tmp/base
    /path/to/repo/.venv/bin/python /path/to/repo/bench/bench_math_one_server.py

Prints the pass times, pass 1's CPU seconds (serving process, math workers) and the agreement;
no JSON file (a comparison note, not a benchmark of record).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_math


def main() -> None:
    cases = bench_math.load_cases()
    bench_math._wait_math_ready = _maybe_ready  # older servers have no math health service
    got = bench_math.run_certd(cases, None, overruns=False)
    keep = ("seconds_per_pass", "pass_1_cpu_s", "agreement")
    print(json.dumps({"load": os.getloadavg(), **{k: got[k] for k in keep}}))


def _maybe_ready(address: str) -> None:
    import grpc

    try:
        _READY(address, 600.0)
    except grpc.RpcError:
        pass  # NOT_FOUND: a server from before the math health service


_READY = bench_math._wait_math_ready

if __name__ == "__main__":
    main()
