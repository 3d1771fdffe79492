"""A closed connection's TIME_WAIT entry on the same port never decides a caller's principal.

A client that reuses a local port still listed in TIME_WAIT (inode 0) used to resolve to
``host:127.0.0.1``, a principal of its own beside its uid's: one more share of the server. The
kernel lists a TIME_WAIT entry and the live socket side by side; reusing a port while its
TIME_WAIT entry lasts cannot be forced from a test, so the table here is the real
``/proc/net/tcp`` with one TIME_WAIT line for the live socket's port put before it (said so).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from certd.service import peers


def _time_wait_line(port: int) -> str:
    local = f"0100007F:{port:04X}"  # 127.0.0.1 in /proc's little-endian hex
    return f"   0: {local} 0100007F:C350 06 00000000:00000000 03:00000000 00000000 0 0 0 1\n"


def test_a_time_wait_entry_before_the_live_socket_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    try:
        port = client.getsockname()[1]
        real = Path("/proc/net/tcp").read_text(encoding="ascii").splitlines(keepends=True)
        table = tmp_path / "tcp"
        table.write_text(real[0] + _time_wait_line(port) + "".join(real[1:]), encoding="ascii")
        monkeypatch.setattr(peers, "_NET", (str(table),))
        monkeypatch.setattr(peers, "_cache", {})
        assert peers.principal_of_peer(f"ipv4:127.0.0.1:{port}") == f"uid:{os.getuid()}"
    finally:
        for s in (accepted, client, server):
            s.close()
