"""bench_code's wait for a quiet machine: it sees CPU our own tree uses, and gives up in time."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _quiet import host_busy, host_times, own_cpu_s, wait_quiet


def test_own_cpu_counts_a_busy_child_and_the_wait_gives_up_beside_it() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        before, t0 = own_cpu_s(), host_times()
        time.sleep(0.5)
        assert own_cpu_s() - before > 0.1  # the child's CPU is ours
        assert 0.0 < host_busy(t0, host_times()) <= 1.0
        t = time.monotonic()
        out = wait_quiet(max_wait_s=1.0, step_s=0.25)
        assert time.monotonic() - t < 3.0
        assert out["quiet"] is False and out["own_cpus"] > 0.1
    finally:
        busy.kill()
        busy.wait()
