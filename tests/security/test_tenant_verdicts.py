"""Hostile tenants through certd over gRPC (bwrap and a real Docker engine): verdicts hold.

A real certd on 127.0.0.1 with a code pool of ONE worker, so the attacker and the honest
programs share a warm sandbox. The reproductions of issue 14 items 1 and 4, the Docker shared
memory squatter, a program that kills its own sandbox's supervisor, and the rule that every
INFRA_ERROR is logged with its request id.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_helpers import LAZY_MATH_SECTION

from certd.config import CertdConfig
from certd.service.server import CertdServer
from certd.v1 import tasks_pb2
from forkgate import CertdClient, ClientSettings

IMAGE = os.environ.get("FORKGATE_SANDBOX_IMAGE", "forkgate/sandbox-runner:1")
N = 982451653
CASE_TASK = {
    "domain": "code",
    "language": "python",
    "cases": [
        {
            "stdin": f"{N}\n",
            "stdout": f"Case #1: {hashlib.sha256(str(N).encode()).hexdigest()}\n",
        }
    ],
    "compare": "exact",
}
HONEST = (
    "```python\nimport hashlib\nn = int(input())\n"
    "print('Case #1: ' + hashlib.sha256(str(n).encode()).hexdigest())\n```"
)
# Issue 14, item 1: find an earlier run's output in this process's memory and print it.
HEAP_SCAN = r"""```python
import ctypes, re
for line in open('/proc/self/maps'):
    parts = line.split()
    name = parts[5] if len(parts) > 5 else ''
    if parts[1][0] != 'r' or parts[1][3] != 'p' or name not in ('', '[heap]', '[stack]'):
        continue
    a, b = (int(x, 16) for x in parts[0].split('-'))
    m = re.search(rb'Case #1: [0-9a-f]{64}', ctypes.string_at(a, b - a))
    if m:
        print(m.group().decode())
        break
```"""
# Issue 14, item 4: a tree deeper than Python's recursion limit, made unreadable.
DEEP = (
    "```python\nimport os\nos.chdir('/tmp')\nfor _ in range(1200):\n"
    "    os.mkdir('a')\n    os.chdir('a')\nos.chmod('.', 0)\n```"
)
PROGRAM_VERDICTS = (
    tasks_pb2.WRONG_ANSWER,
    tasks_pb2.RUNTIME_ERROR,
    tasks_pb2.TIME_LIMIT,
    tasks_pb2.MEMORY_LIMIT,
)


def _config(data_dir: Path, backend: str, image: str = IMAGE) -> CertdConfig:
    return CertdConfig.model_validate(
        {
            "data_dir": str(data_dir),
            "listen": "127.0.0.1:0",
            "math": LAZY_MATH_SECTION,
            "code": {
                "backend": backend,
                "pool_size": 1,
                "cpu_time_s": 3.0,
                "wall_time_s": 6.0,
                "memory_bytes": 256 << 20,
                "processes": 16,
                "workdir_bytes": 16 << 20,
                "acquire_timeout_s": 60.0,
                "docker_image": image,
            },
        }
    )


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CertdServer]:
    srv = CertdServer(_config(tmp_path_factory.mktemp(f"certd-{request.param}"), request.param))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(grace_s=1.0)


@pytest.fixture()
def client(server: CertdServer) -> Iterator[CertdClient]:
    with CertdClient(f"127.0.0.1:{server.port}", settings=ClientSettings(timeout_s=120)) as c:
        yield c
        after = c.verify(CASE_TASK, HONEST)
        assert after.status == tasks_pb2.CORRECT, f"the next honest check failed: {after.detail}"


def test_a_program_cannot_pass_by_reading_an_earlier_output(client: CertdClient) -> None:
    for _ in range(2):
        assert client.verify(CASE_TASK, HONEST).status == tasks_pb2.CORRECT
    v = client.verify(CASE_TASK, HEAP_SCAN)
    assert v.status == tasks_pb2.WRONG_ANSWER, v.detail


def test_deep_nesting_is_a_wrong_answer_not_an_infra_error(client: CertdClient) -> None:
    v = client.verify(CASE_TASK, DEEP)
    assert v.status == tasks_pb2.WRONG_ANSWER, v.detail
    for _ in range(2):
        assert client.verify(CASE_TASK, HONEST).status == tasks_pb2.CORRECT


def test_shared_memory_squatters_leave_nothing_behind(client: CertdClient) -> None:
    squat = (
        "```python\nimport ctypes\nlibc = ctypes.CDLL(None)\nlibc.shmat.restype = ctypes.c_void_p\n"
        "for key in range(1, 64):\n    i = libc.shmget(0x5000 + key, 32 << 20, 0o1666)\n"
        "    if i < 0:\n        break\n    p = libc.shmat(i, None, 0)\n"
        "    if p in (None, 2**64 - 1):\n        break\n"
        "    ctypes.memset(p, 1, 32 << 20)\n    libc.shmdt(ctypes.c_void_p(p))\n```"
    )
    v = client.verify(CASE_TASK, squat)
    assert v.status in PROGRAM_VERDICTS, (v.status, v.detail)
    for _ in range(3):
        assert client.verify(CASE_TASK, HONEST).status == tasks_pb2.CORRECT


def test_killing_its_own_supervisor_is_the_programs_verdict(client: CertdClient) -> None:
    # Docker's default seccomp profile allows prlimit on a process of the same uid: pid 1 gets
    # a CPU limit it has already used up and the kernel kills it, taking the container. bwrap
    # refuses the call. Either way the program gets a program verdict, not INFRA_ERROR.
    attack = (
        "```python\nimport resource\n"
        "for pid in (1, 2, 3, 4, 5, 6, 7):\n    try:\n"
        "        resource.prlimit(pid, resource.RLIMIT_CPU, (0, 0))\n"
        "    except OSError:\n        pass\n"
        "import time\ntime.sleep(2)\n```"
    )
    v = client.verify(CASE_TASK, attack)
    assert v.status in PROGRAM_VERDICTS, (v.status, v.detail)


def test_an_infra_error_is_logged_with_its_request_id(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A real certd whose Docker backend names an image that does not exist: no worker can start,
    # which is the host's fault, so INFRA_ERROR, logged with the RPC's request id.
    cfg = _config(tmp_path, "docker", image="forkgate/no-such-image:0")
    cfg = cfg.model_copy(update={"code": cfg.code.model_copy(update={"acquire_timeout_s": 1.0})})
    srv = CertdServer(cfg)
    srv.start()
    try:
        caplog.set_level(logging.ERROR, logger="certd.code")
        with CertdClient(f"127.0.0.1:{srv.port}", settings=ClientSettings(timeout_s=60)) as c:
            v = c.verify(CASE_TASK, HONEST)
    finally:
        srv.stop(grace_s=1.0)
    assert v.status == tasks_pb2.INFRA_ERROR, v.detail
    lines = [r.getMessage() for r in caplog.records if r.name == "certd.code"]
    assert any(re.search(r"INFRA_ERROR \[[0-9a-f]{16}\]", line) for line in lines), lines
