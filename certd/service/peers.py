"""The principal of a call without authentication: the peer's user, not its connection.

Example::

    principal_of_peer("ipv4:127.0.0.1:51234")                  # "uid:1000" (the client's user)
    principal_of_peer("ipv4:127.0.0.1:51234", by="process")    # "process:4242" (its pid)
    principal_of_peer("ipv4:10.0.0.7:51234")                   # "host:10.0.0.7"

Admission holds one principal to at most half of the server's slots. Were the principal the
connection, one process could open several connections and hold several halves; were it the
process, one user could fork several processes and hold several halves. So on loopback the
principal is, by default (``limits.local_principal: uid``), the *user* that owns the client's
socket: the socket is found in ``/proc/net/tcp{,6}`` by its address and port, and its owner's
uid is read there. A user cannot make more uids without privilege; the one way it has them is
subordinate ids (``/etc/subuid``, for rootless containers), so a uid inside a range listed
there counts as the range's owner. ``by="process"`` keeps the older rule (two local processes
are two principals; the socket's inode is found in ``/proc/<pid>/fd``, and the socket's uid
stands in when the owner is not visible): fairer between the processes of one trusted user,
no bound on a user that forks. A remote peer is its host (``host:ADDR``), the only identity
TCP gives it; a peer that is neither (a Unix socket) is its peer string. Lookups are cached
by socket inode.

A server that knows its own port (``server_port``) asks the kernel for the caller's connection
(``certd.service.sockdiag``) instead of reading the whole socket table: by its four-tuple when
the server listens on one address, else for the client port's connections to the server's
port. When two of those share the caller's port (one to each of two server addresses), one
user owning them all is that user, and sockets of two users make the caller its connection
(``connection:ADDR:PORT``), not a guess that could name another user's socket. The table is
read only on a kernel without sock_diag.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import socket
import threading
from typing import Literal

from certd.service import sockdiag

__all__ = ["LocalPrincipal", "listen_address", "principal_of_peer", "user_of"]

LocalPrincipal = Literal["uid", "process"]
_SUBUID = "/etc/subuid"

_NET = ("/proc/net/tcp", "/proc/net/tcp6")
_CACHE_MAX = 4096
_cache: dict[tuple[int, str], str] = {}
_lock = threading.Lock()


def _split(peer: str) -> tuple[str, int] | None:
    """("127.0.0.1", 5555) from ``ipv4:127.0.0.1:5555`` or ``ipv6:[::1]:5555``."""
    if not peer.startswith(("ipv4:", "ipv6:")):
        return None
    host, _, port = peer[5:].rpartition(":")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        return None


def _decode(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    ip6 = ipaddress.IPv6Address(words)
    return str(ip6.ipv4_mapped or ip6)


def _socket_of(host: str, port: int) -> tuple[int, int] | None:
    """(inode, uid) of the local socket bound to host:port, from /proc/net."""
    want = str(ipaddress.ip_address(host))
    mapped = getattr(ipaddress.ip_address(host), "ipv4_mapped", None)
    want = str(mapped) if mapped else want
    tail = f":{port:04X}"
    for table in _NET:
        try:
            with open(table, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    local = fields[1]
                    inode = int(fields[9])
                    if inode == 0:  # a closed connection's TIME_WAIT entry: not the caller's
                        continue
                    if local.endswith(tail) and _decode(local[: -len(tail)]) == want:
                        return inode, int(fields[7])
        except OSError:
            continue
    return None


def _owner(inode: int) -> int | None:
    """The pid holding the socket ``inode``, among the processes this one may inspect."""
    target = f"socket:[{inode}]"
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with os.scandir(f"/proc/{name}/fd") as fds:
                for fd in fds:
                    try:
                        if os.readlink(fd.path) == target:
                            return int(name)
                    except OSError:
                        continue
        except OSError:
            continue
    return None


def _subuid_ranges(path: str = _SUBUID) -> list[tuple[int, int, int]]:
    """(first, count, owner uid) of each subordinate uid range in ``path``."""
    ranges = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.strip().split(":")
        if len(fields) != 3 or not fields[1].isdigit() or not fields[2].isdigit():
            continue
        owner = fields[0]
        if not owner.isdigit():
            try:
                owner = str(pwd.getpwnam(owner).pw_uid)
            except KeyError:
                continue
        ranges.append((int(fields[1]), int(fields[2]), int(owner)))
    return ranges


def user_of(uid: int, subuid: str = _SUBUID) -> int:
    """The user a socket's ``uid`` counts as: the owner of its subordinate range, else itself."""
    for first, count, owner in _subuid_ranges(subuid):
        if first <= uid < first + count:
            return owner
    return uid


def listen_address(listen: str) -> str | None:
    """The one IP address ``listen`` (``host:port``) binds; None for a wildcard or a name."""
    host = listen.rsplit(":", 1)[0].strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    return None if ip.is_unspecified else str(ip)


_AMBIGUOUS = (-1, -1)
_ONE_USER = -2  # the inode of (inode, uid) when several sockets answer, all of one user


def _connection_of(
    host: str, port: int, server_port: int | None, server_host: str | None
) -> tuple[int, int] | None:
    """(inode, uid) of the client socket host:port: asked of the kernel, else from the table.

    With the server's own address (a listen on one address, certd's default) the four-tuple is
    the connection's and no other socket can answer. A wildcard listen leaves the address the
    client dialled unknown: the kernel is asked for every connection from host:port to the
    server's port. One is the caller's; several (the kernel lets connections to different
    destinations share an ephemeral port, so the client's port may reach the server on two of
    its addresses) are that user's when one user owns them all (``(_ONE_USER, uid)``: a user
    gains no principal by sharing its ports), else ``_AMBIGUOUS``: no socket is taken for the
    caller's on a guess.
    """
    if server_port is None:
        return _socket_of(host, port)
    try:
        if server_host:
            found = sockdiag.connection_owner((host, port), (server_host, server_port))
            return None if found is None else (found.inode, found.uid)
        entries = sockdiag.connections_to_port((host, port), server_port)
    except sockdiag.Unavailable:
        return _socket_of(host, port)
    if len(entries) > 1:
        uids = {e.uid for e in entries}
        return (_ONE_USER, uids.pop()) if len(uids) == 1 else _AMBIGUOUS
    return (entries[0].inode, entries[0].uid) if entries else None


def principal_of_peer(
    peer: str,
    by: LocalPrincipal = "uid",
    server_port: int | None = None,
    server_host: str | None = None,
) -> str:
    """The principal of an unauthenticated call from ``peer`` (grpc's peer string).

    Args:
        peer: grpc's peer string (``ipv4:127.0.0.1:51234``).
        by: on loopback, ``uid`` (the socket owner's user) or ``process`` (its pid).
        server_port: the port the call came in on, when known: the connection is then looked
            up by its four-tuple rather than found in the whole socket table.
        server_host: the one address the server listens on (None for a wildcard or a name):
            the four-tuple is then exact.
    """
    parts = _split(peer)
    if parts is None:
        return f"peer:{peer}"
    host, port = parts
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        return f"host:{host}"
    if not loopback:
        return f"host:{host}"
    found = _connection_of(host, port, server_port, server_host)
    if found == _AMBIGUOUS:
        return f"connection:{host}:{port}"  # its own share, and no other caller's
    if found is not None and found[0] == _ONE_USER:
        return f"uid:{user_of(found[1])}"  # the process is unknown: the user is not
    if found is None or found[0] == 0:
        return f"host:{host}"
    inode, uid = found
    with _lock:
        known = _cache.get((inode, by))
    if known is not None:
        return known
    pid = _owner(inode) if by == "process" else None
    who = f"process:{pid}" if pid is not None else f"uid:{user_of(uid)}"
    with _lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[(inode, by)] = who
    return who
