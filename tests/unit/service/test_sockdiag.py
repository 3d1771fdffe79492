"""A loopback caller's principal comes from the kernel's record of its one connection.

Real sockets, the real kernel (``sock_diag``), a real second user (``nobody``, in a forked
child). With the server's port known, the lookup is by four-tuple and never reads the socket
table (``/proc/net/tcp`` pointed at a missing file still answers); without it, the table.
"""

from __future__ import annotations

import os
import pwd
import random
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from certd.service import peers, sockdiag

NOBODY = pwd.getpwnam("nobody").pw_uid


@contextmanager
def _pair(family: int, server_host: str, client_host: str) -> Iterator[tuple[socket.socket, int]]:
    """A connected client socket and the server's port."""
    server = socket.socket(family)
    client = socket.socket(family)
    try:
        server.bind((server_host, 0))
        server.listen(1)
        port = server.getsockname()[1]
        client.connect((client_host, port))
        accepted, _ = server.accept()
        with accepted:
            yield client, port
    finally:
        client.close()
        server.close()


def _peer_string(client: socket.socket) -> str:
    host, port = client.getsockname()[:2]
    mapped = getattr(peers.ipaddress.ip_address(host), "ipv4_mapped", None)
    if mapped is not None or ":" not in host:
        return f"ipv4:{mapped or host}:{port}"
    return f"ipv6:[{host}]:{port}"


_SHAPES = [
    (socket.AF_INET, "127.0.0.1", "127.0.0.1"),
    (socket.AF_INET6, "::1", "::1"),
    (socket.AF_INET6, "::", "::ffff:127.0.0.1"),  # an IPv4 address through an IPv6 socket
]


@pytest.mark.parametrize("seed", range(6))
def test_the_four_tuple_lookup_finds_the_client_socket_and_nothing_else(seed: int) -> None:
    family, server_host, client_host = random.Random(seed).choice(_SHAPES)
    with _pair(family, server_host, client_host) as (client, port):
        local = client.getsockname()[:2]
        found = sockdiag.connection_owner(local, (client_host, port))
        assert found == sockdiag.SockEntry(os.getuid(), os.fstat(client.fileno()).st_ino)
        other_port = port + 1 if port < 65535 else 1  # another server port: not this connection
        assert sockdiag.connection_owner(local, (client_host, other_port)) is None


def test_a_closed_connection_is_not_found() -> None:
    with _pair(socket.AF_INET, "127.0.0.1", "127.0.0.1") as (client, port):
        cport = client.getsockname()[1]
    assert sockdiag.connection_owner(("127.0.0.1", cport), ("127.0.0.1", port)) is None


def test_with_the_server_port_the_socket_table_is_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peers, "_NET", (str(tmp_path / "missing"),))
    monkeypatch.setattr(peers, "_cache", {})
    for family, server_host, client_host in _SHAPES:
        with _pair(family, server_host, client_host) as (client, port):
            peer = _peer_string(client)
            assert peers.principal_of_peer(peer, server_port=port) == f"uid:{os.getuid()}"
            assert peers.principal_of_peer(peer) == "host:" + peer[5:].rpartition(":")[0].strip(
                "[]"
            )


@contextmanager
def _as_nobody(connect: Callable[[], bytes]) -> Iterator[bytes]:
    """Run ``connect`` in a forked child as ``nobody``; yield what it reported while the child
    keeps its sockets open, then let it exit."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    "127.0.0.1".encode("idna")  # the codec a host string needs, imported before dropping to nobody
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(ready_w, connect())
            os.read(done_r, 1)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        yield os.read(ready_r, 64)
    finally:
        os.write(done_w, b"x")
        os.waitpid(child, 0)
        for fd in (ready_r, done_w):
            os.close(fd)


def test_another_users_connection_is_that_user() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    held: list[socket.socket] = []

    def connect() -> bytes:
        held.append(socket.create_connection(("127.0.0.1", port)))
        return str(held[0].getsockname()[1]).encode()

    try:
        with _as_nobody(connect) as reply:
            cport = int(reply)
            accepted, _ = server.accept()
            with accepted:
                peers._cache.clear()
                by_tuple = peers.principal_of_peer(f"ipv4:127.0.0.1:{cport}", server_port=port)
                by_table = peers.principal_of_peer(f"ipv4:127.0.0.1:{cport}")
                assert by_tuple == by_table == f"uid:{NOBODY}"
    finally:
        server.close()


def test_a_port_shared_with_a_connection_elsewhere_does_not_name_the_caller() -> None:
    """The kernel lets connections to different destinations share a local port. With the
    server's one address known, the caller's own connection answers, not the other one:
    the server listens on 127.0.0.2:P, a decoy on 127.0.0.1:P; the caller reaches the
    server from 127.0.0.1:X and another socket the decoy from the same 127.0.0.1:X. Guessing
    the address the caller dialled (its own, as a wildcard listen once did) found the other."""
    server = socket.create_server(("127.0.0.2", 0))
    port = server.getsockname()[1]
    decoy = socket.create_server(("127.0.0.1", port))
    caller, other = (socket.socket() for _ in range(2))
    try:
        for s in (caller, other):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        caller.bind(("127.0.0.1", 0))
        shared = caller.getsockname()[1]
        other.bind(("127.0.0.1", shared))
        caller.connect(("127.0.0.2", port))
        other.connect(("127.0.0.1", port))
        peer = f"ipv4:127.0.0.1:{shared}"
        caller_inode = os.fstat(caller.fileno()).st_ino
        assert peers._connection_of("127.0.0.1", shared, port, "127.0.0.2")[0] == caller_inode
        # without the server's address (a wildcard listen) both sockets are connections from
        # X to port P: neither is taken for the caller's on a guess; both are this user's
        found = peers._connection_of("127.0.0.1", shared, port, None)
        assert found == (peers._ONE_USER, os.getuid())
        assert peers.listen_address("127.0.0.2:50051") == "127.0.0.2"
        assert peers.listen_address("[::]:50051") is None
        assert peers.principal_of_peer(peer, server_port=port, server_host="127.0.0.2") == (
            f"uid:{os.getuid()}"
        )
    finally:
        for s in (caller, other, server, decoy):
            s.close()


def test_a_wildcard_listen_names_the_caller_by_its_connections_to_the_server_port() -> None:
    """A server on 0.0.0.0:P does not know which address the caller dialled. The caller reaches
    it at 127.0.0.2:P from 127.0.0.1:X; a socket to another server port Q shares X. The kernel's
    filter on both ports finds the caller alone (the old guess of the dialled address found
    nothing and read the table, whose first entry for X could be the other socket). When a
    second connection from X reaches the server on another of its addresses, the caller is its
    connection's user when it owns both, and its connection, never the other socket's owner, when
    another user's socket shares the port (below)."""
    server = socket.create_server(("0.0.0.0", 0))
    port = server.getsockname()[1]
    elsewhere = socket.create_server(("127.0.0.1", 0))
    caller, other, second = (socket.socket() for _ in range(3))
    try:
        for s in (caller, other, second):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", 0))
        shared = other.getsockname()[1]
        other.connect(elsewhere.getsockname())
        caller.bind(("127.0.0.1", shared))
        caller.connect(("127.0.0.2", port))
        peer = f"ipv4:127.0.0.1:{shared}"
        found = peers._connection_of("127.0.0.1", shared, port, None)
        assert found == (os.fstat(caller.fileno()).st_ino, os.getuid())
        assert peers.principal_of_peer(peer, server_port=port) == f"uid:{os.getuid()}"
        second.bind(("127.0.0.1", shared))
        second.connect(("127.0.0.3", port))
        peers._cache.clear()
        # two connections of one user: that user (sharing ports gains it no principal)
        assert peers.principal_of_peer(peer, server_port=port) == f"uid:{os.getuid()}"
        assert peers.principal_of_peer(peer, by="process", server_port=port) == (
            f"uid:{os.getuid()}"
        )
        assert peers.principal_of_peer(peer, server_port=port, server_host="127.0.0.2") == (
            f"uid:{os.getuid()}"
        )
    finally:
        for s in (caller, other, second, server, elsewhere):
            s.close()


def test_a_port_shared_with_another_users_connection_makes_the_caller_its_connection() -> None:
    """On a wildcard listen, ``nobody`` connects from the caller's port to another of the
    server's addresses: the kernel shows two users' sockets, and neither user is named."""
    server = socket.create_server(("0.0.0.0", 0))
    port = server.getsockname()[1]
    caller = socket.socket()
    caller.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    caller.bind(("127.0.0.1", 0))
    shared = caller.getsockname()[1]
    caller.connect(("127.0.0.2", port))
    held: list[socket.socket] = []

    def connect() -> bytes:
        other = socket.socket()
        held.append(other)
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", shared))
        other.connect(("127.0.0.3", port))
        return b"1"

    try:
        with _as_nobody(connect) as reply:
            assert reply == b"1", "nobody could not share the port"
            peers._cache.clear()
            principal = peers.principal_of_peer(f"ipv4:127.0.0.1:{shared}", server_port=port)
            assert principal == f"connection:127.0.0.1:{shared}"
    finally:
        caller.close()
        server.close()
