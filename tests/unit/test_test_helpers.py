"""The suite's own helpers: ``wait_until`` and the loopback port helpers."""

from __future__ import annotations

import errno
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from port_helpers import closed_port, reserved_port
from wait_helpers import wait_until


def test_wait_until_returns_the_first_truthy_result_as_soon_as_it_holds() -> None:
    calls = iter([0, None, [], "ready", "later"])
    started = time.monotonic()
    assert wait_until(lambda: next(calls), timeout=5, interval=0.01) == "ready"
    assert time.monotonic() - started < 1


def test_wait_until_fails_naming_what_it_waited_for_and_the_last_result() -> None:
    with pytest.raises(AssertionError, match=r"waited 0.1s for the pool; last result: \[\]"):
        wait_until(lambda: [], timeout=0.1, interval=0.01, what="the pool")


def _connect(port: int) -> int:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port))


def test_a_closed_port_refuses_connections_and_cannot_be_taken() -> None:
    with closed_port() as port:
        assert _connect(port) == errno.ECONNREFUSED
        with socket.socket() as other, pytest.raises(OSError) as e:
            other.bind(("127.0.0.1", port))
        assert e.value.errno == errno.EADDRINUSE


def test_a_reserved_port_is_free_for_its_server_once_released() -> None:
    with reserved_port() as port:
        assert isinstance(port, int) and _connect(port) == errno.ECONNREFUSED
        assert port.release() == port
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))
            server.listen()
            assert _connect(port) == 0


def test_the_serial_phase_reads_only_modules_that_write_the_mark_and_misses_none(
    tmp_path: Path,
) -> None:
    """``-m serial`` skips importing modules without ``mark.serial`` (tests/conftest.py); a
    module that makes a test serial without writing it is refused in every other run."""
    here = Path(__file__).resolve().parents[1]
    for name in ("conftest.py", "module_seconds.json", "cpu_accounting.py"):
        shutil.copy(here / name, tmp_path / name)
    (tmp_path / "test_written.py").write_text(
        "import pytest\n\n@pytest.mark.serial\ndef test_a():\n    pass\n\ndef test_b():\n    pass\n"
    )
    (tmp_path / "test_heavy.py").write_text("raise SystemExit('imported')\n")

    def collect(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        return subprocess.run(
            [*command, "-p", "no:xdist", *args, str(tmp_path)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    serial = collect("-m", "serial", "-o", "markers=serial: alone")
    assert serial.returncode == 0, serial.stdout + serial.stderr
    assert "test_written.py::test_a" in serial.stdout and "1 deselected" in serial.stdout
    (tmp_path / "test_heavy.py").write_text(
        "import pytest\n\npytestmark = getattr(pytest.mark, 'ser' + 'ial')\n\n"
        "def test_c():\n    pass\n"
    )
    everything = collect("-o", "markers=serial: alone")
    assert everything.returncode == pytest.ExitCode.USAGE_ERROR, everything.stdout
    assert "test_heavy.py::test_c is serial, but its module never writes" in everything.stderr
