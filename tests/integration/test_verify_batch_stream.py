"""``forkgate verify-batch`` streams: its memory does not grow with the input (issue 19).

A real ``forkgate verify-batch`` process against a real certd on 127.0.0.1 reads a generated
file of N lines and then one of 4N; the peak RSS of each process (``wait4``) may differ by a
few MB of allocator noise, not by the tens of MB that holding 3N more lines would take. Memory,
not time, is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LINE = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
RESPONSES = ["<answer>(25-5)*4+3</answer>", "<answer>25+5+4+3</answer>", "no answer"]


# A small parent runs the CLI and reports its child's peak RSS: a child forked from this big
# test process would count the parent's pages it shared before exec.
_MEASURE = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(p.pid, 0)\n"
    "print(usage.ru_maxrss)\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def _peak_rss_kb(address: str, src: Path, tmp_path: Path) -> int:
    argv = [sys.executable, "-m", "forkgate.cli", "verify-batch", "--server", address]
    argv += ["--in", str(src), "--out", str(tmp_path / "out.jsonl"), "--batch-size", "500"]
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.mark.slow
def test_memory_does_not_grow_with_the_input(address: str, tmp_path: Path) -> None:
    sizes = (10_000, 40_000)
    peaks = []
    for n in sizes:
        src = tmp_path / f"in-{n}.jsonl"
        with src.open("w") as f:
            for i in range(n):
                # a field of our own on every line: it has to be carried, not kept
                row = {"id": i, **LINE, "response": RESPONSES[i % 3], "note": "x" * 200}
                f.write(json.dumps(row) + "\n")
        peaks.append(_peak_rss_kb(address, src, tmp_path))
        assert sum(1 for _ in (tmp_path / "out.jsonl").open()) == n
    # 30,000 more lines of ~330 bytes held as dicts would be well over 30 MB
    assert peaks[1] - peaks[0] < 15_000, peaks
