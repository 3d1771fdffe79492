"""Clients inherited through ``fork()``, as a DataLoader worker inherits the trainer's.

gRPC does not support a channel made before ``fork()`` in the child (grpc/grpc
``doc/fork_support.md``): ``CertdClient`` builds a new channel in the child on its first call
there, and ``AsyncCertdClient`` refuses with ``UsedAfterForkError``. Either way the parent's
client goes on working.

Each child reports one JSON line through a pipe and leaves with ``os._exit``; the parent waits
for it up to ``CHILD_DEADLINE_S`` and kills it after, so a hang fails the test instead of
hanging the suite. A child imports nothing: whatever it runs is imported here, and the parent
makes the same calls first, so the client's own deferred imports (receipt checks) are done.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

import pytest

from forkgate import AsyncCertdClient, CertdClient, Status
from forkgate.errors import UsedAfterForkError

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
ANSWER = "<answer>(25-5)*4+3</answer>"
CHILDREN = 3
CHILD_DEADLINE_S = 30.0

# Every test verifies the same correct answer; nothing counts the server's state.
pytestmark = pytest.mark.shared_certd


def test_sync_client_connects_again_in_each_forked_child(address: str, vkey: str) -> None:
    with CertdClient(address, trusted_keys=[vkey]) as client:
        assert client.verify(TASK, ANSWER).status is Status.CORRECT  # connected, threads up
        assert client.verify_batch([(TASK, ANSWER)])[0].status is Status.CORRECT  # its imports
        parent_channel = client._channel

        def child() -> dict[str, Any]:
            """Several calls, as a data loader worker makes: one new channel serves them all."""
            statuses = [client.verify(TASK, ANSWER).status.name]
            child_channel = client._channel
            statuses += [client.verify(TASK, ANSWER).status.name for _ in range(2)]
            statuses += [v.status.name for v in client.verify_batch([(TASK, ANSWER)] * 3)]
            return {
                "statuses": statuses,
                "new_channel": child_channel is not parent_channel,
                "one_channel": client._channel is child_channel,
            }

        reports = run_in_forked_children(child)

        want = {"statuses": ["CORRECT"] * 6, "new_channel": True, "one_channel": True}
        assert reports == [want] * CHILDREN
        assert client.verify(TASK, ANSWER).status is Status.CORRECT
        assert client._channel is parent_channel  # the parent kept its own channel


def test_async_client_refuses_in_a_forked_child(address: str, vkey: str) -> None:
    with asyncio.Runner() as runner:  # one event loop, alive across the forks
        client = runner.run(_make_async_client(address, vkey))
        assert runner.run(client.verify(TASK, ANSWER)).status is Status.CORRECT

        def child() -> dict[str, Any]:
            try:
                asyncio.run(client.verify(TASK, ANSWER))
            except UsedAfterForkError as e:
                refusal = str(e)
            else:
                refusal = ""
            with CertdClient(address, trusted_keys=[vkey]) as own:  # what the refusal advises
                status = own.verify(TASK, ANSWER).status.name
            return {"refusal": refusal, "own_client": status}

        reports = run_in_forked_children(child)

        for report in reports:
            assert report["refusal"].startswith("AsyncCertdClient made in process ")
            assert "after fork(); use a CertdClient in the child" in report["refusal"]
            assert report["own_client"] == "CORRECT"
        assert runner.run(client.verify(TASK, ANSWER)).status is Status.CORRECT
        runner.run(client.close())


async def _make_async_client(address: str, vkey: str) -> AsyncCertdClient:
    """The client, made inside the runner's loop (its channel belongs to that loop)."""
    return AsyncCertdClient(address, trusted_keys=[vkey])


def run_in_forked_children(child: Callable[[], dict[str, Any]]) -> list[dict[str, Any]]:
    """Run ``child`` in ``CHILDREN`` forked processes at once; return their reports in order.

    Raises:
        AssertionError: a child raised (its error is in the message), exited non-zero, or
            was still running at ``CHILD_DEADLINE_S`` (it is killed first).
    """
    started: list[tuple[int, int]] = []
    for _ in range(CHILDREN):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _report_and_exit(child, write_fd)
        os.close(write_fd)
        started.append((pid, read_fd))
    deadline = time.monotonic() + CHILD_DEADLINE_S
    return [_collect(pid, read_fd, deadline) for pid, read_fd in started]


def _report_and_exit(child: Callable[[], dict[str, Any]], write_fd: int) -> NoReturn:
    """In the child: run ``child``, write its report (or its error) and exit at once.

    The report also names every module the child imported (``imported_in_child``), which the
    parent requires to be none. ``os._exit`` skips the atexit handlers and pytest's teardown,
    which belong to the parent; the child never returns into the test.
    """
    modules_at_fork = set(sys.modules)
    code = 1
    try:
        report = child()
        report["imported_in_child"] = sorted(set(sys.modules) - modules_at_fork)
        line = json.dumps(report)
        code = 0
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which fails the test
        line = json.dumps({"child_error": f"{type(e).__name__}: {e}"})
    finally:
        os.write(write_fd, line.encode() + b"\n")
        os._exit(code)


def _collect(pid: int, read_fd: int, deadline: float) -> dict[str, Any]:
    """One child's report, read until the child exits; killed if it outlives ``deadline``."""
    received = b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise AssertionError(
                    f"child {pid} still running after {CHILD_DEADLINE_S:g}s (killed); "
                    f"it wrote {received!r}"
                )
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            received += chunk
    finally:
        os.close(read_fd)
    _, status = os.waitpid(pid, 0)  # the pipe closed: the child has exited
    report: dict[str, Any] = json.loads(received) if received else {}
    assert "child_error" not in report, f"child {pid}: {report['child_error']}"
    assert os.waitstatus_to_exitcode(status) == 0, f"child {pid} ended with {status=}: {received!r}"
    assert report.pop("imported_in_child") == [], f"child {pid} imported after the fork"
    return report
