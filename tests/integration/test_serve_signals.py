"""``certd serve`` stops on SIGTERM whichever of its threads the kernel hands the signal to.

A process-directed signal goes to any thread that does not block it; CPython runs the handler
in the main thread, and only once that thread runs Python again. ``certd serve``'s main thread
waits for the signal with a timeout, so a SIGTERM taken by a gRPC or ledger thread stops it as
one taken by the main thread does. The test sends the signal to one thread (``tgkill``), each
of a non-main thread and the main one, and expects the ``stopped`` line and exit 0.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYS_TGKILL = {"x86_64": 234, "aarch64": 131}.get(platform.machine())
CONFIG = {"math": {"warm_start": False, "prime_grammar": False}, "countdown": {"verify_workers": 0}}


def _tgkill(pid: int, tid: int, signum: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(SYS_TGKILL, pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill {pid} {tid}")


@pytest.mark.skipif(SYS_TGKILL is None, reason=f"no tgkill number for {platform.machine()}")
@pytest.mark.parametrize("thread", ["a non-main thread", "the main thread"])
def test_sigterm_to_any_thread_stops_the_server(tmp_path: Path, thread: str) -> None:
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "certd.cli", "serve", "--data-dir", str(tmp_path / "data"),
            "--listen", "127.0.0.1:0", "--config", str(tmp_path / "config.json"), "--json",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["event"] == "serving"
        tids = sorted(int(t) for t in os.listdir(f"/proc/{proc.pid}/task"))
        others = [t for t in tids if t != proc.pid]
        assert others, "certd serve runs threads beside its main one"
        _tgkill(proc.pid, others[-1] if thread != "the main thread" else proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert json.loads(out.splitlines()[-1])["event"] == "stopped"
