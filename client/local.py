"""Run a local ``certd serve`` in its own process (for demos, benchmarks and tests).

Example::

    with LocalCertd(Path("out/certd-data")) as certd:
        client = CertdClient(certd.address, trusted_keys=[certd.vkey])

It starts ``python -m certd.cli serve`` on a free loopback port and reads the address and log
key from its first JSON line; leaving the block sends SIGTERM (a graceful shutdown) and waits.
The server is a separate program: this module imports nothing from it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from .errors import CertdUnavailableError, SetupError

__all__ = ["LocalCertd"]


class LocalCertd:
    """A ``certd serve`` child process on 127.0.0.1.

    Args:
        data_dir: the server's data dir (created on first start).
        stderr: where the server's log goes (default: discarded).
        config: a JSON config file for the server (default: its embedded default).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        stderr: int | None = subprocess.DEVNULL,
        config: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        extra = ["--config", str(config)] if config is not None else []
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "certd.cli",
                "serve",
                "--data-dir",
                str(data_dir),
                "--listen",
                "127.0.0.1:0",
                "--json",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait(timeout=30)
            raise CertdUnavailableError(f"certd serve exited with status {code} before serving")
        info = json.loads(line)
        if "address" not in info:  # {"error": …, "message": …}: it refused to start
            code = self.process.wait(timeout=30)
            message = f"certd serve could not start: {info.get('message', line.strip())}"
            if code == 2:  # usage: a bad config, or a missing extra (the message names it)
                raise SetupError(message)
            raise CertdUnavailableError(message)
        self.address: str = str(info["address"])
        self.vkey: str = str(info["vkey"])

    def __enter__(self) -> LocalCertd:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM (graceful shutdown) and wait; kill if it does not stop in time."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()
