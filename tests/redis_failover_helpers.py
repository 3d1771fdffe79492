"""A Redis replica behind a link the test can cut: Redis's asynchronous replication, made
deterministic.

``ReplicationLink`` is a TCP relay on 127.0.0.1 between a replica and its primary. ``hold()``
stops forwarding the primary's replication stream (the replica's acknowledgements still
flow), so writes the primary acknowledges reach only the primary; ``cut()`` then drops the
held bytes and closes the link, as losing the primary's machine does. SIGSTOP of the replica
does not give this window: the kernel keeps buffering the stream for the stopped process and
the killed primary's orphaned socket keeps sending it, so after SIGCONT the replica applies
what a lost machine would never have delivered (measured here: 100 and 1,000 SETs of 3 KB,
300 KB and 3 MB of stream, written while the replica was stopped and the primary SIGKILLed
before SIGCONT, all reached the replica; 5,000 SETs, 15 MB: 40 did).
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

import redis
from redis_helpers import RedisProcess, free_port, redis_binary

__all__ = ["ReplicaRedis", "ReplicationLink", "wait_in_sync"]


class ReplicationLink:
    """Relay from ``127.0.0.1:port`` to the primary's port, one connection at a time."""

    def __init__(self, primary_port: int) -> None:
        self.primary_port = primary_port
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._forward = threading.Event()
        self._forward.set()
        self._cut = threading.Event()
        self._socks: list[socket.socket] = []
        self.held_bytes = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._cut.is_set():
            try:
                down, _ = self._listener.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(("127.0.0.1", self.primary_port), timeout=5)
            except OSError:
                down.close()
                continue
            up.settimeout(None)
            self._socks += [down, up]
            threading.Thread(target=self._pump, args=(up, down, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(down, up, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_primary: bool) -> None:
        try:
            while not self._cut.is_set():
                if from_primary:  # held: stop reading, the primary's buffers fill
                    while not self._forward.wait(0.05):
                        if self._cut.is_set():
                            return
                data = src.recv(65536)
                if not data:
                    break
                if from_primary and not self._forward.is_set():
                    self.held_bytes += len(data)
                    self._forward.wait()
                if self._cut.is_set():
                    return  # dropped: never reached the replica
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                s.close()

    def hold(self) -> None:
        """Stop forwarding the primary's replication stream."""
        self._forward.clear()

    def cut(self) -> None:
        """Drop what was held and close the link for good."""
        self._cut.set()
        self._listener.close()
        for s in self._socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self._forward.set()


class ReplicaRedis(RedisProcess):
    """A redis-server with AOF ``always`` replicating from ``127.0.0.1:primary_port``."""

    def __init__(self, directory: Path, primary_port: int) -> None:
        super().__init__(directory)
        self.primary_port = primary_port

    def start(self) -> ReplicaRedis:
        args = [
            redis_binary(),
            "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.directory),
            "--appendonly", "yes", "--appendfsync", self.appendfsync, "--save", "",
            "--protected-mode", "yes", "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
            "--replicaof", "127.0.0.1", str(self.primary_port),
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)

    def lag_behind(self, primary: RedisProcess) -> int:
        """Replication bytes the primary has written that this replica has not received."""
        with (
            redis.Redis(host="127.0.0.1", port=primary.port, socket_timeout=10) as p,
            self.client() as r,
        ):
            ahead = int(p.info("replication")["master_repl_offset"])
            return ahead - int(r.info("replication")["slave_repl_offset"])

    def promote(self) -> None:
        """``REPLICAOF NO ONE``: the replica becomes a primary with what it holds."""
        with self.client() as r:
            r.execute_command("REPLICAOF", "NO", "ONE")
            assert r.info("replication")["role"] == "master"


def wait_in_sync(primary: RedisProcess, replica: ReplicaRedis, timeout: float = 60) -> int:
    """Wait until the replica's link is up and its offset equals the primary's; that offset."""
    deadline = time.monotonic() + timeout
    with (
        redis.Redis(host="127.0.0.1", port=primary.port, socket_timeout=10) as p,
        replica.client() as r,
    ):
        while time.monotonic() < deadline:
            try:
                info = r.info("replication")
                offset = int(p.info("replication")["master_repl_offset"])
            except redis.RedisError:
                time.sleep(0.1)
                continue
            if info.get("master_link_status") == "up" and info.get("slave_repl_offset") == offset:
                return offset
            time.sleep(0.1)
    raise AssertionError(f"the Redis replica did not catch up: {info}")
