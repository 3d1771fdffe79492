"""Loopback ports for tests without the pick-then-bind race.

Example::

    from port_helpers import closed_port, reserved_port

    with closed_port() as port:            # nothing listens on it while the block runs
        client = CertdClient(f"127.0.0.1:{port}")
    with reserved_port() as port:          # held until the server takes it
        ...; port.release(); server = CertdServer(cfg(listen=f"127.0.0.1:{port}"))

A server the test starts itself binds ``127.0.0.1:0`` and reports its port
(``CertdServer.start()``, the ``certd serving on HOST:PORT`` line of ``certd serve``). The two
helpers here are for the cases where no server binds, or where the port must be known before
the server starts: asking the OS for a free port and binding it later lets any other process
(another test, another helper's suite) take it in between. Both helpers hold the port with a
bound socket that does not listen, so a connection to it is refused and no one else can bind it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ReservedPort", "closed_port", "reserved_port"]


def _bound() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    return s


@contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port on which nothing listens (connections refused) for the whole block."""
    with _bound() as s:
        yield int(s.getsockname()[1])


class ReservedPort(int):
    """A port number (an ``int``) held by a bound socket until :meth:`release`."""

    _sock: socket.socket

    def release(self) -> int:
        """Free the port for the server about to bind it (immediately before it does)."""
        self._sock.close()
        return int(self)


@contextmanager
def reserved_port() -> Iterator[ReservedPort]:
    """A loopback port nobody else can bind until the test releases it to its own server.

    Connections are refused while it is held (as for a server not started yet).
    """
    s = _bound()
    port = ReservedPort(s.getsockname()[1])
    port._sock = s
    try:
        yield port
    finally:
        s.close()
