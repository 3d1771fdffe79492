"""The owner of one local TCP connection, asked of the kernel by its four-tuple (``sock_diag``).

``/proc/net/tcp`` lists every socket of the network namespace, so finding one connection there
costs a pass over all of them: with 8,000 loopback sockets open a lookup took ~35 ms of Python,
paid by every call a server admits — a neighbour that holds idle connections slows every other
caller. The kernel's ``sock_diag`` netlink interface (what ``ss`` uses) answers a request for
one connection by its (local address, local port, remote address, remote port) with a hash
lookup: ~0.02 ms whatever the number of sockets (measured with 8,000 open).

Example::

    connection_owner(("127.0.0.1", 51234), ("127.0.0.1", 50051))
    # SockEntry(uid=1000, inode=81234): the client's socket, as seen from the server's port

``None`` means no such live connection (or a closed one's TIME_WAIT entry, inode 0);
``Unavailable`` is raised where the interface is not (a kernel or sandbox without
``NETLINK_SOCK_DIAG``), and the caller reads ``/proc/net/tcp`` instead.

A server listening on a wildcard address does not know which of its addresses a client dialled,
so it cannot name the four-tuple. ``connections_to_port`` asks instead for every live socket
whose local end is the client's and whose remote port is the server's: the kernel filters by
both ports (the bytecode ``ss`` uses), and only the client's connections to that port answer::

    connections_to_port(("127.0.0.1", 51234), 50051)
    # [SockEntry(uid=1000, inode=81234)]: one connection, so it is the caller's
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["SockEntry", "Unavailable", "connection_owner", "connections_to_port"]

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 0x1
_NLM_F_DUMP = 0x300
_NLMSG_ERROR = 2
_NLMSG_DONE = 3
_INET_DIAG_REQ_BYTECODE = 1
_BC_S_EQ = 11  # inet_diag_bc_op codes: the local port equals, the remote port equals
_BC_D_EQ = 12
_NOCOOKIE = 0xFFFFFFFF
_ALL_STATES = 0xFFFFFFFF

_NLMSGHDR = struct.Struct("=IHHII")
# inet_diag_req_v2: family, protocol, ext, pad, states, then inet_diag_sockid.
_REQ = struct.Struct("=BBBBI48s")
# inet_diag_sockid: ports big-endian, addresses in network order, interface, cookie.
_SOCKID = struct.Struct("!HH16s16s")
_SOCKID_TAIL = struct.pack("=III", 0, _NOCOOKIE, _NOCOOKIE)
# inet_diag_msg: family, state, timer, retrans, sockid (48), expires, rqueue, wqueue, uid, inode.
_MSG = struct.Struct("=BBBB48sIIIII")
_ERRNO = struct.Struct("=i")
_NLATTR = struct.Struct("=HH")
# inet_diag_bc_op: code, bytes to jump when true, when false (a port compare holds its port in
# the next op's third field, so it is 8 bytes long).
_BC_OP = struct.Struct("=BBH")
_seq = iter(range(1, 1 << 31))
_seq_lock = threading.Lock()


class Unavailable(Exception):
    """The kernel has no sock_diag interface here."""


@dataclass(frozen=True)
class SockEntry:
    """One connection's owner: the uid that created the socket, and the socket's inode."""

    uid: int
    inode: int


def _packed(host: str, family: int) -> bytes:
    ip = ipaddress.ip_address(host)
    if family == socket.AF_INET6 and ip.version == 4:
        ip = ipaddress.IPv6Address(f"::ffff:{ip}")
    return ip.packed.ljust(16, b"\0")


def _request(family: int, local: tuple[str, int], remote: tuple[str, int], seq: int) -> bytes:
    sockid = (
        _SOCKID.pack(local[1], remote[1], _packed(local[0], family), _packed(remote[0], family))
        + _SOCKID_TAIL
    )
    body = _REQ.pack(family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES, sockid)
    head = _NLMSGHDR.pack(_NLMSGHDR.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, seq, 0)
    return head + body


def _port_filter(local_port: int, remote_port: int) -> bytes:
    """Bytecode: accept a socket whose local port is ``local_port`` and remote port
    ``remote_port``; jumping 4 bytes past the end rejects."""
    return (
        _BC_OP.pack(_BC_S_EQ, 8, 20)
        + _BC_OP.pack(0, 0, local_port)
        + _BC_OP.pack(_BC_D_EQ, 8, 12)
        + _BC_OP.pack(0, 0, remote_port)
    )


def _dump_request(family: int, local_port: int, remote_port: int, seq: int) -> bytes:
    bytecode = _port_filter(local_port, remote_port)
    attr = _NLATTR.pack(_NLATTR.size + len(bytecode), _INET_DIAG_REQ_BYTECODE) + bytecode
    sockid = _SOCKID.pack(0, 0, bytes(16), bytes(16)) + _SOCKID_TAIL
    body = _REQ.pack(family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES, sockid) + attr
    flags = _NLM_F_REQUEST | _NLM_F_DUMP
    head = _NLMSGHDR.pack(_NLMSGHDR.size + len(body), _SOCK_DIAG_BY_FAMILY, flags, seq, 0)
    return head + body


def _dumped(sock: socket.socket, seq: int) -> list[tuple[bytes, SockEntry]]:
    """Every (local address, entry) of a dump's replies, until its end."""
    found: list[tuple[bytes, SockEntry]] = []
    while True:
        data = sock.recv(65536)
        at = 0
        while at + _NLMSGHDR.size <= len(data):
            length, kind, _flags, got, _pid = _NLMSGHDR.unpack_from(data, at)
            if got == seq:
                if kind in (_NLMSG_DONE, _NLMSG_ERROR):
                    return found
                msg = _MSG.unpack_from(data, at + _NLMSGHDR.size)
                uid, inode = msg[8], msg[9]
                if inode:  # a TIME_WAIT entry has none: no socket left
                    found.append((msg[4][4:20], SockEntry(uid, inode)))
            at += (length + 3) & ~3


def _ask(sock: socket.socket, request: bytes, seq: int) -> SockEntry | None:
    sock.send(request)
    while True:
        data = sock.recv(8192)
        _length, kind, _flags, got, _pid = _NLMSGHDR.unpack_from(data)
        if got != seq:
            continue
        if kind == _NLMSG_ERROR:
            return None  # ENOENT: no such connection in this family
        msg = _MSG.unpack_from(data, _NLMSGHDR.size)
        uid, inode = msg[8], msg[9]
        return SockEntry(uid, inode) if inode else None


@contextmanager
def _diag() -> Iterator[tuple[socket.socket, Callable[[], int]]]:
    """A sock_diag netlink socket and a source of fresh sequence numbers; any OSError (no
    interface, or one failing mid-request) is ``Unavailable``."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
    except OSError as e:
        raise Unavailable(str(e)) from e

    def seq() -> int:
        with _seq_lock:
            return next(_seq)

    try:
        sock.settimeout(2.0)
        yield sock, seq
    except OSError as e:
        raise Unavailable(str(e)) from e
    finally:
        sock.close()


def connection_owner(local: tuple[str, int], remote: tuple[str, int]) -> SockEntry | None:
    """The socket whose local end is ``local`` and remote end ``remote``, or None.

    Both families are asked: a client may reach an IPv4 address through an IPv6 socket
    (``::ffff:127.0.0.1``).

    Raises:
        Unavailable: no sock_diag interface.
    """
    families = [socket.AF_INET6]
    if ipaddress.ip_address(local[0]).version == 4 and ipaddress.ip_address(remote[0]).version == 4:
        families.insert(0, socket.AF_INET)
    with _diag() as (sock, next_seq):
        for family in families:
            seq = next_seq()
            found = _ask(sock, _request(family, local, remote, seq), seq)
            if found is not None:
                return found
    return None


def connections_to_port(local: tuple[str, int], remote_port: int) -> list[SockEntry]:
    """Every live socket whose local end is ``local`` and whose remote port is ``remote_port``.

    The connections of a client port to a server port on any of the host's addresses: what a
    server listening on a wildcard address can name. One entry is the caller's connection; more
    than one (connections to several of the server's addresses sharing the client's port) leave
    it unknown which is the caller's.

    Raises:
        Unavailable: no sock_diag interface.
    """
    wanted = {socket.AF_INET6: _packed(local[0], socket.AF_INET6)}
    if ipaddress.ip_address(local[0]).version == 4:
        wanted[socket.AF_INET] = _packed(local[0], socket.AF_INET)
    found: list[SockEntry] = []
    with _diag() as (sock, next_seq):
        for family, address in wanted.items():
            seq = next_seq()
            sock.send(_dump_request(family, local[1], remote_port, seq))
            found += [entry for at, entry in _dumped(sock, seq) if at == address]
    return found
