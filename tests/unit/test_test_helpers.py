"""The suite's own helpers: ``wait_until`` and the loopback port helpers."""

from __future__ import annotations

import errno
import socket
import time

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
