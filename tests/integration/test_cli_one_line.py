"""Ctrl-C and a busy port: one line on stderr and a documented exit code (docs/exit-codes.md)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from wait_helpers import wait_until

# A real CLI process, blocked reading stdin inside main() when it prints "ready".
_BLOCKED = {
    "forkgate": (
        "forkgate.cli",
        ["verify-batch", "--server", "127.0.0.1:9", "--in", "-", "--out", "{out}"],
    ),
    "certd": ("certd.cli", ["kappa-report", "--in", "-"]),
}


def _reading_stdin(pid: int) -> bool:
    """A thread of ``pid`` is in read(0, …) (x86-64 syscall 0 on fd 0; /proc/PID/syscall)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            call = (task / "syscall").read_text().split()
        except OSError:  # the thread ended
            continue
        if call[:2] == ["0", "0x0"]:
            return True
    return False


def _as_a_terminal_job() -> None:
    """SIGINT as a shell's foreground job has it. A process started with SIGINT ignored keeps
    it ignored (POSIX; a shell's background job), and some library in the test run leaves the
    pytest process so, which its children would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("name", sorted(_BLOCKED))
def test_ctrl_c_is_one_line_and_exit_130(name: str, tmp_path: Path) -> None:
    module, argv = _BLOCKED[name]
    argv = [a.replace("{out}", str(tmp_path / "out.jsonl")) for a in argv]
    code = f"import sys, {module} as cli; print('ready', flush=True); sys.exit(cli.main({argv!r}))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_as_a_terminal_job,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    wait_until(lambda: _reading_stdin(proc.pid), timeout=60, what="main() blocked on stdin")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip() == f"{name}: interrupted"  # no traceback
    assert not (tmp_path / "out.jsonl").exists()  # nothing half-written


def test_certd_serve_on_a_busy_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run(
            [
                sys.executable, "-m", "certd.cli", "serve",
                "--data-dir", str(tmp_path / "d"), "--listen", f"127.0.0.1:{port}",
            ],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert run.returncode == 2, run.stderr
    lines = [x for x in run.stderr.splitlines() if "RuntimeWarning" not in x]
    assert lines == [f"certd: error: cannot listen on 127.0.0.1:{port}: Address already in use"]
