"""Hostile programs through certd over gRPC, on both sandbox backends.

Each program is contained, certd keeps serving, and the next honest check still passes.
Attacks are written so that a *successful* attack would define a correct solution (and so be
scored CORRECT) while a contained one fails; ``status != CORRECT`` is the containment check,
next to host-side checks (files not written, the key not leaked, certd alive).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_helpers import LAZY_MATH_SECTION

from certd.config import CertdConfig
from certd.service.server import CertdServer
from certd.v1 import tasks_pb2
from forkgate import CertdClient, ClientSettings

# Run alone, after the parallel suite (make unit): a starved sandbox is INFRA_ERROR
# "host overloaded", not the verdict asserted.
pytestmark = pytest.mark.serial

TASK = {
    "domain": "code",
    "language": "python",
    "prompt": "",
    "test": "def check(f):\n    assert f(1, 2) == 3\n    assert f(5, 5) == 10\n",
    "entry_point": "add",
}
IO_TASK = {
    "domain": "code",
    "language": "python",
    "cases": [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "5 5\n", "stdout": "10\n"}],
    "compare": "exact",
}
HONEST = "```python\ndef add(a, b):\n    return a + b\n```"
WIN = "\ndef add(a, b):\n    return a + b\n"  # appended when an attack "succeeds"


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CertdServer]:
    cfg = CertdConfig.model_validate(
        {
            "data_dir": str(tmp_path_factory.mktemp(f"certd-{request.param}")),
            "listen": "127.0.0.1:0",
            "math": LAZY_MATH_SECTION,
            "code": {
                "backend": request.param,
                "pool_size": 2,
                "cpu_time_s": 2.0,
                "wall_time_s": 4.0,
                "memory_bytes": 256 << 20,
                "processes": 16,
                "output_bytes": 64 << 10,
                "file_size_bytes": 1 << 20,
                "workdir_bytes": 16 << 20,
                "docker_image": os.environ.get(
                    "FORKGATE_SANDBOX_IMAGE", "forkgate/sandbox-runner:1"
                ),
            },
        }
    )
    srv = CertdServer(cfg)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(grace_s=1.0)


@pytest.fixture()
def client(server: CertdServer) -> Iterator[CertdClient]:
    with CertdClient(f"127.0.0.1:{server.port}", settings=ClientSettings(timeout_s=120)) as c:
        yield c
    with CertdClient(f"127.0.0.1:{server.port}", settings=ClientSettings(timeout_s=120)) as c:
        after = c.verify(TASK, HONEST)
    assert after.status == tasks_pb2.CORRECT, f"the next honest check failed: {after.detail}"


def attack(body: str) -> str:
    """A program that runs ``body``; ``body`` calls ``win()`` only if the attack worked."""
    return (
        "```python\ndef win():\n    global add\n    exec("
        + repr(WIN)
        + ", globals())\n"
        + body
        + "\n```"
    )


def status(c: CertdClient, program: str, task: dict[str, object] = TASK) -> tasks_pb2.Verdict:
    v = c.verify(task, program)
    assert v.status != tasks_pb2.CORRECT, f"attack not contained: {v.detail}"
    # The attack ran: a program that does not parse, or a sandbox failure, would prove nothing.
    bad = (tasks_pb2.VERDICT_STATUS_UNSPECIFIED, tasks_pb2.INFRA_ERROR, tasks_pb2.COMPILE_ERROR)
    assert v.status not in bad, v.detail
    return v


def test_network_connect(client: CertdClient, server: CertdServer) -> None:
    targets = [("127.0.0.1", server.port), ("10.0.0.1", 80), ("1.1.1.1", 53)]
    body = (
        "import socket\nok = False\n"
        f"for host, port in {targets!r}:\n"
        "    try:\n        socket.create_connection((host, port), timeout=1); ok = True\n"
        "    except OSError:\n        pass\n"
        "if ok:\n    win()\n"
    )
    status(client, attack(body))


def test_reading_the_signing_key_and_process_environments(
    client: CertdClient, server: CertdServer
) -> None:
    key_path = server.cfg.key_path.resolve()
    secret = key_path.read_text().strip()
    os.environ["FORKGATE_CANARY"] = "canary-value"
    try:
        body = (
            "import os, sys\nleaked = []\n"
            f"try:\n    leaked.append(open({str(key_path)!r}, 'rb').read())\n"
            "except OSError:\n    pass\n"
            "for p in ['/proc/1/environ', '/proc/self/environ', '/proc/1/cmdline']:\n"
            "    try:\n        blob = open(p, 'rb').read()\n"
            "    except OSError:\n        continue\n"
            "    if b'FORKGATE_CANARY' in blob or b'certd' in blob:\n"
            "        leaked.append(blob)\n"
            "sys.stderr.write(repr(leaked)[-300:] + '\\n')\n"
            "if leaked:\n    win()\n"
            "raise SystemExit(1)\n"
        )
        v = status(client, attack(body))
    finally:
        del os.environ["FORKGATE_CANARY"]
    assert secret not in v.detail and "canary" not in v.detail


def test_fork_bomb(client: CertdClient) -> None:
    body = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    status(client, attack(body))


def test_memory_bomb(client: CertdClient) -> None:
    v = status(client, attack("blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n"))
    assert v.status in (tasks_pb2.MEMORY_LIMIT, tasks_pb2.RUNTIME_ERROR)


def test_forked_memory_bomb(client: CertdClient) -> None:
    body = (
        "import os\nfor _ in range(8):\n    if os.fork() == 0:\n"
        "        x = [bytearray(16 << 20) for _ in range(14)]\n        import time; time.sleep(5)\n"
        "import time; time.sleep(10)\n"
    )
    status(client, attack(body))


def test_disk_fill(client: CertdClient) -> None:
    body = (
        "import os\ni = 0\n"
        "for d in ('.', '/tmp', '/dev/shm'):\n"
        "    try:\n"
        "        while True:\n"
        "            with open(f'{d}/fill{i}', 'wb') as f:\n"
        "                f.write(b'x' * (512 << 10))\n"
        "            i += 1\n"
        "    except OSError:\n        pass\n"
        "if i > 1000:\n    win()\n"
        "raise SystemExit(1)\n"
    )
    status(client, attack(body))


def test_infinite_loop(client: CertdClient) -> None:
    assert status(client, attack("while True:\n    pass\n")).status == tasks_pb2.TIME_LIMIT


def test_sleeping_forever(client: CertdClient) -> None:
    v = status(client, attack("import time\ntime.sleep(3600)\n"))
    assert v.status == tasks_pb2.TIME_LIMIT


def test_stdout_flood(client: CertdClient) -> None:
    body = "import sys\nwhile True:\n    sys.stdout.write('A' * 65536)\n"
    status(client, attack(body))
    status(client, "```python\nwhile True:\n    print('3')\n```", IO_TASK)


def test_writing_outside_the_workdir(client: CertdClient, tmp_path: Path) -> None:
    mark = tmp_path / "escaped"
    body = (
        "import os\nwrote = []\n"
        f"for p in [{str(mark)!r}, '/usr/pwned', '/etc/pwned', '/pwned', '../pwned',"
        " '/bin/pwned']:\n"
        "    try:\n        open(p, 'w').write('x'); wrote.append(p)\n"
        "    except OSError:\n        pass\n"
        "if any(not p.startswith('../') for p in wrote):\n    win()\n"
        "raise SystemExit(1)\n"
    )
    status(client, attack(body))
    assert not mark.exists()


def test_a_daemonised_child_is_gone_before_the_next_check(client: CertdClient) -> None:
    body = (
        "import os, time\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        while True:\n            open('/tmp/daemon', 'w').write(str(time.time()))\n"
        "            time.sleep(0.01)\n    os._exit(0)\n"
        "raise SystemExit(1)\n"
    )
    status(client, attack(body))
    probe = (  # pid 1, the inline-run template, the tests' process and the probe's own
        "import os\nif not os.path.exists('/tmp/daemon') and"
        " len([p for p in os.listdir('/proc') if p.isdigit()]) <= 4:\n    pass\n"
        "else:\n    raise SystemExit('leftover daemon visible')\n" + WIN
    )
    for _ in range(4):  # whichever worker serves it
        v = client.verify(TASK, "```python\n" + probe + "```")
        assert v.status == tasks_pb2.CORRECT, v.detail


def test_signals_to_other_processes(client: CertdClient, server: CertdServer) -> None:
    body = (
        "import os, signal\n"
        f"for pid in (-1, 1, {os.getpid()}, {os.getppid()}):\n"
        "    try:\n        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n        pass\n"
        "raise SystemExit(1)\n"
    )
    status(client, attack(body))
    assert server.port > 0  # this process (certd) is still here to answer the next check


@pytest.mark.parametrize(
    "body",
    [
        "import sys\nsys.exit(0)\n",
        "import os\nos._exit(0)\n",
        "def add(a, b):\n    try:\n        return a - b\n"
        "    finally:\n        raise SystemExit(0)\n",
        "def add(a, b):\n    print('All tests passed!')\n    import os; os._exit(0)\n",
        "import atexit, os\natexit.register(lambda: os._exit(0))\ndef add(a, b):\n    return 0\n",
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
        "import os, signal\nos.kill(1, signal.SIGKILL)\nos.kill(os.getppid(), signal.SIGKILL)\n",
        "import os\nos.write(3, b'0' * 48)\nos._exit(0)\n",
        "import os\nos.close(4)\ndef add(a, b):\n    return a + b\n",
    ],
    ids=[
        "sys.exit",
        "os._exit",
        "SystemExit-in-finally",
        "fake-marker",
        "atexit-exit",
        "kill-self",
        "kill-harness",
        "forged-completion",
        "closed-nonce-channel",
    ],
)
def test_fake_pass_tricks_fail(client: CertdClient, body: str) -> None:
    status(client, "```python\n" + body + "```")


@pytest.mark.parametrize(
    "program",
    [
        "print(3)\nprint(10)\n",  # hard-coded: passes one case at most
        "a, b = map(int, input().split())\nprint(a + b, end='')\n",  # truncated (no newline)
        "a, b = map(int, input().split())\nprint(a + b)\nprint('extra')\n",  # extra output
        "import sys\nprint('3')\nsys.exit(0)\n",
    ],
)
def test_io_mode_compares_outside(client: CertdClient, program: str) -> None:
    status(client, "```python\n" + program + "```", IO_TASK)


def test_certd_is_unreachable_from_inside(server: CertdServer, client: CertdClient) -> None:
    # And, from outside, certd still answers on its port after all of the above.
    with socket.create_connection(("127.0.0.1", server.port), timeout=5):
        pass
