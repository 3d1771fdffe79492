"""Exit codes of the CLIs (docs/exit-codes.md): 0 ok, 1 refused/failed, 2 usage, 3 down.

Each code is checked on a real command against a real certd (or a port nothing listens on);
the trust-path verbs (admit, check-cert, audit, serve) have theirs in test_trust_path.py and
test_store_unexplained.py.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from certd.cli import main as certd_main
from forkgate.cli import main as forkgate_main


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


def test_health(address: str) -> None:
    assert certd_main(["health", "--server", address]) == 0
    assert certd_main(["health", "--server", f"127.0.0.1:{_dead_port()}", "--timeout", "2"]) == 3


def test_audit_of_a_server_nobody_runs_is_3_and_a_missing_ledger_is_2(
    vkey: str, tmp_path: Path
) -> None:
    dead = f"127.0.0.1:{_dead_port()}"
    state = str(tmp_path / "s.json")
    assert certd_main(["audit", "--server", dead, "--trust", vkey, "--state", state]) == 3
    assert certd_main(["audit", "--data-dir", str(tmp_path / "none"), "--state", state]) == 2


def test_forkgate_usage_and_down(vkey: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "absent.json")
    assert forkgate_main(["check-cert", missing, "--trust", vkey]) == 2
    dead = f"127.0.0.1:{_dead_port()}"
    assert forkgate_main(["guard", "--server", dead, "--run", "r"]) == 3
    bad = subprocess.run(
        [sys.executable, "-m", "forkgate.cli", "admit", "--in", "x"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2  # argparse: --trust and --out are required
