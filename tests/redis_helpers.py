"""Real ``redis-server`` processes for tests: a temp dir, a free loopback port, AOF on.

Each ``RedisProcess`` is its own server; tests never touch a shared instance.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

__all__ = ["RedisProcess", "free_port", "redis_binary"]


def redis_binary() -> str:
    """The ``redis-server`` path, or skip the test with the reason when it is not installed."""
    found = shutil.which("redis-server")
    if found is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS reports free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisProcess:
    """One redis-server on 127.0.0.1 with its AOF in ``directory``."""

    def __init__(self, directory: Path, appendfsync: str = "always") -> None:
        self.directory = directory
        self.appendfsync = appendfsync
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisProcess:
        args = [
            redis_binary(),
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--dir", str(self.directory),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
            "--protected-mode", "yes",
            "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: {log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self, kill: bool = False) -> None:
        """Stop the server: SIGTERM (Redis flushes the AOF) or SIGKILL."""
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self, kill: bool = False) -> RedisProcess:
        """Stop and start again on the same port, loading the AOF."""
        self.stop(kill=kill)
        return self.start()
