"""The Docker worker's direct channel: one unix socket, one connection, from pid 1 only.

Example (what :class:`sandboxes.docker.DockerSandbox` does per worker)::

    channel = DirectChannel.open()
    # bind-mount channel.host_dir read-only at CONTAINER_DIR, start the container with
    # ``--channel=CONTAINER_SOCKET`` on the zygote's argv, then:
    sock = channel.accept(container_pid, deadline, alive=lambda: True)

Frames between certd and the zygote then go straight through the kernel instead of through
dockerd and containerd-shim (the attached stream carries the zygote's stderr only).

By construction no weaker than the attached stream:

* the host directory sits in a private ``0700`` parent (no other host user reaches it); the
  mounted directory is search-only (``0711``) and read-only inside the container;
* exactly one connection is accepted, and only from the container's pid 1 as the engine reports
  it (``SO_PEERCRED``); at that moment pid 1 is the container's only process;
* the socket is unlinked and the listener closed right after, so nothing started later (the
  template, the runs) can connect: the directory is empty and the path is gone.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .errors import SandboxProtocolError

__all__ = ["CONTAINER_DIR", "CONTAINER_SOCKET", "DirectChannel"]

CONTAINER_DIR = "/run/forkgate"
"""Where the channel's directory is mounted (read-only) inside the worker container."""
CONTAINER_SOCKET = CONTAINER_DIR + "/worker.sock"
"""The socket path pid 1 connects to (gone once it has)."""

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class DirectChannel:
    """A listening unix socket in a private host directory, for one worker's pid 1."""

    def __init__(self, parent: Path) -> None:
        self._parent = parent
        self.host_dir = parent / "channel"
        self.host_dir.mkdir(mode=0o711)
        os.chmod(self.host_dir, 0o711)  # the container's uid must reach the socket by name
        self._path = self.host_dir / "worker.sock"
        self._listener: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self._path))
        os.chmod(self._path, 0o666)  # connect() needs write permission on the socket
        self._listener.listen(1)

    @classmethod
    def open(cls) -> DirectChannel:
        """Make the private directory and the listening socket.

        Returns:
            The channel, listening.
        """
        parent = Path(tempfile.mkdtemp(prefix="forkgate-worker-"))  # 0700, certd's own
        try:
            return cls(parent)
        except OSError:
            shutil.rmtree(parent, ignore_errors=True)
            raise

    def accept(self, pid: int, deadline: float, alive: Callable[[], bool]) -> socket.socket:
        """Accept the one connection, check it comes from ``pid``, and close the door.

        Args:
            pid: The container's pid 1 as the host sees it (the engine's ``State.Pid``).
            deadline: A ``time.monotonic()`` value.
            alive: Whether the container still runs (checked while waiting).

        Returns:
            The connected socket (blocking).

        Raises:
            SandboxProtocolError: No connection in time, the container went, or the peer is
                not the container's pid 1.
        """
        listener = self._listener
        if listener is None:
            raise SandboxProtocolError("the channel was already used")
        try:
            conn = self._wait(listener, deadline, alive)
        finally:
            self.close()  # unlink + close: no second connection, ever
        peer_pid, _, _ = _UCRED.unpack(
            conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        )
        if peer_pid != pid:
            conn.close()
            raise SandboxProtocolError(
                f"channel peer is pid {peer_pid}, expected the container's pid 1 ({pid})"
            )
        conn.setblocking(True)
        return conn

    @staticmethod
    def _wait(listener: socket.socket, deadline: float, alive: Callable[[], bool]) -> socket.socket:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxProtocolError("the worker did not connect its channel in time")
            listener.settimeout(min(left, 0.25))
            try:
                conn, _ = listener.accept()
                return conn
            except TimeoutError:
                if not alive():
                    raise SandboxProtocolError("the worker exited before connecting") from None

    def close(self) -> None:
        """Close the listener and remove the directory (idempotent)."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        shutil.rmtree(self._parent, ignore_errors=True)
