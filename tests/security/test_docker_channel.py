"""The Docker worker's direct channel admits its pid 1 once, and nothing else, ever.

certd frames to a Docker worker over a unix socket bind-mounted read-only into the container
(``sandboxes/_docker_channel.py``). Attack class: a run (or anything but the container's pid 1)
connecting to the supervisor's channel, or a second connection after pid 1's. Tested with a
real Docker engine (a hostile program inside, a second client outside) and on the channel alone.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from sandbox_backends import CEILING, make_backend

from sandboxes import Program, Worker
from sandboxes._docker_channel import CONTAINER_DIR, CONTAINER_SOCKET, DirectChannel
from sandboxes.docker import DockerSandbox, DockerTransport
from sandboxes.errors import SandboxProtocolError

HOSTILE = f"""
import json, os, socket
seen = {{}}
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink("/proc/self/fd/" + fd)
    except OSError:
        continue
    if target.startswith("socket:"):
        seen["socket_fd"] = fd
try:
    seen["listing"] = os.listdir({CONTAINER_DIR!r})
except OSError as exc:
    seen["listing"] = type(exc).__name__
for path in [{CONTAINER_SOCKET!r}, {CONTAINER_DIR!r} + "/channel/worker.sock"]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        seen[path] = "connected"
    except OSError as exc:
        seen[path] = type(exc).__name__
    s.close()
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    box = make_backend("docker")
    assert isinstance(box, DockerSandbox) and box.uses_direct_channel()
    w = box.start_worker()
    yield w
    w.kill()
    box.close()


def _channel(w: Worker) -> socket.socket:
    transport = w.transport
    assert isinstance(transport, DockerTransport)
    assert transport._channel is not None, "the worker frames through the engine"
    return transport._channel


def test_a_run_cannot_list_or_connect_to_the_workers_channel(worker: Worker) -> None:
    for inline in (False, True):
        program = Program(
            argv=("python3", "main.py"), files={"main.py": HOSTILE.encode()}, inline_python=inline
        )
        r = worker.run(program, CEILING)
        assert r.ok, (r.status, r.detail, r.stderr[-300:])
        seen = json.loads(r.stdout)
        assert seen["listing"] in ([], "PermissionError"), seen
        assert seen[CONTAINER_SOCKET] in ("FileNotFoundError", "ConnectionRefusedError"), seen
        assert "socket_fd" not in seen, seen
        assert "connected" not in seen.values(), seen


def test_the_channels_peer_is_the_containers_pid1_and_its_path_is_gone(worker: Worker) -> None:
    conn = _channel(worker)
    peer_pid = int.from_bytes(
        conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)[:4], "little"
    )
    container = worker.transport.container  # type: ignore[attr-defined]
    container.reload()
    assert peer_pid == container.attrs["State"]["Pid"]
    path = conn.getsockname()
    assert path.endswith("/channel/worker.sock")
    assert not os.path.exists(path)
    second = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with pytest.raises(OSError):
        second.connect(path)
    second.close()


def test_a_second_connection_and_a_wrong_peer_are_refused() -> None:
    channel = DirectChannel.open()
    assert os.stat(channel.host_dir.parent).st_mode & 0o777 == 0o700
    path = str(channel.host_dir / "worker.sock")
    first = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    first.connect(path)
    with pytest.raises(SandboxProtocolError, match="expected the container's pid 1"):
        channel.accept(os.getpid() + 1, time.monotonic() + 5, alive=lambda: True)
    second = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with pytest.raises(OSError):
        second.connect(path)
    assert not channel.host_dir.exists()
    with pytest.raises(SandboxProtocolError, match="already used"):
        channel.accept(os.getpid(), time.monotonic() + 5, alive=lambda: True)
    first.close()
    second.close()


def test_the_right_peer_is_accepted_once() -> None:
    channel = DirectChannel.open()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(channel.host_dir / "worker.sock"))
    conn = channel.accept(os.getpid(), time.monotonic() + 5, alive=lambda: True)
    client.sendall(b"frame")
    assert conn.recv(5) == b"frame"
    conn.close()
    client.close()


def test_a_worker_that_never_connects_fails_fast_when_its_container_exits() -> None:
    channel = DirectChannel.open()
    start = time.monotonic()
    with pytest.raises(SandboxProtocolError, match="exited before connecting"):
        channel.accept(1, time.monotonic() + 30, alive=lambda: False)
    assert time.monotonic() - start < 5


class _DiesAtStart(DockerSandbox):
    """A worker whose pid 1 writes to stderr and exits before connecting its channel."""

    def container_config(self) -> dict[str, object]:
        config = super().container_config()
        code = "import sys; sys.stderr.write('boom from pid 1\\n'); sys.exit(3)"
        config["command"] = [self.options.python, "-c", code]
        return config


def test_a_pid1_that_dies_before_connecting_fails_fast_with_its_last_words() -> None:
    box = make_backend("docker")
    assert isinstance(box, DockerSandbox)
    dying = _DiesAtStart(box.limits, box.options)
    start = time.monotonic()
    with pytest.raises(SandboxProtocolError, match="exited before connecting: boom from pid 1"):
        dying.start_worker()
    assert time.monotonic() - start < 10
    dying.close()
    box.close()
