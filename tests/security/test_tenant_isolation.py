"""A check shares nothing with the next: hostile tenants of one warm worker, on both backends.

Each test runs an attacker and then a probe *in the same warm worker* (a pool of one) of a real
backend (bubblewrap, a real Docker engine), and asserts what the probe could see or suffer.
Each attack also has a positive control where that makes sense (the probe's method finds the
thing when it is there), so a probe that cannot see anything cannot pass by accident.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from sandbox_backends import BACKENDS, make_backend

from sandboxes import ExecResult, ExecStatus, Limits, Program, WarmPool

LIMITS = Limits(
    cpu_time_s=3.0,
    wall_time_s=6.0,
    memory_bytes=256 * 2**20,
    processes=16,
    output_bytes=256 * 1024,
    file_size_bytes=8 * 2**20,
    open_files=64,
    workdir_bytes=16 * 2**20,
)
SECRET = "Case #1: " + "ab12" * 16

# Scans every readable private mapping of the process for the pattern of an earlier output.
HEAP_SCAN = r"""
import ctypes, re
found = set()
for line in open('/proc/self/maps'):
    parts = line.split()
    name = parts[5] if len(parts) > 5 else ''
    if parts[1][0] != 'r' or parts[1][3] != 'p' or name not in ('', '[heap]', '[stack]'):
        continue
    a, b = (int(x, 16) for x in parts[0].split('-'))
    for m in re.finditer(rb'Case #1: [0-9a-f]{64}', ctypes.string_at(a, b - a)):
        found.add(m.group().decode())
print(sorted(found))
"""


@pytest.fixture(scope="module", params=BACKENDS)
def pool(request: pytest.FixtureRequest) -> Iterator[WarmPool]:
    box = make_backend(request.param, LIMITS)
    with WarmPool(box, size=1, max_runs=1000) as p:
        assert p.wait_ready(120), "the worker did not start"
        yield p
    box.close()


def py(code: str, stdin: bytes = b"", inline: bool = True) -> Program:
    return Program(
        argv=("python3", "main.py"),
        files={"main.py": code.encode()},
        stdin=stdin,
        inline_python=inline,
    )


def run(pool: WarmPool, program: Program) -> ExecResult:
    r = pool.run(program)
    assert r.status is not ExecStatus.SANDBOX_ERROR, r.detail
    return r


@pytest.mark.parametrize("attacker_inline", [True, False])
def test_a_run_cannot_read_an_earlier_runs_output_from_memory(
    pool: WarmPool, attacker_inline: bool
) -> None:
    # Positive control: the scanner finds the pattern in its own memory.
    control = run(pool, py(f"x = {SECRET!r}.encode() * 3\n" + HEAP_SCAN))
    assert SECRET in control.stdout.decode()
    for _ in range(2):  # honest runs print the secret; stdin and stdout pass through pid 1
        r = run(pool, py("print(input())", stdin=SECRET.encode() + b"\n"))
        assert r.stdout.decode().strip() == SECRET
    probe = run(pool, py(HEAP_SCAN, inline=attacker_inline))
    assert probe.ok, probe.stderr
    assert json.loads(probe.stdout.decode().replace("'", '"')) == []


def test_dev_is_read_only_and_stdio_names_keep_working(pool: WarmPool) -> None:
    attack = (
        "import os\nout = []\n"
        "for op in (lambda: os.unlink('/dev/stdin'), lambda: os.symlink('/etc/x', '/dev/evil'),\n"
        "           lambda: open('/dev/fill', 'wb').write(b'x' * 1000),\n"
        "           lambda: os.rename('/dev/null', '/dev/null2')):\n"
        "    try:\n        op()\n        out.append('done')\n"
        "    except OSError as e:\n        out.append(e.errno)\n"
        "print(out)\n"
    )
    r = run(pool, py(attack))
    assert "done" not in r.stdout.decode(), r.stdout
    honest = "import sys\ndata = open('/dev/stdin').read()\nopen('/dev/stdout', 'w').write(data)\n"
    r = run(pool, py(honest, stdin=b"42\n"))
    assert r.ok and r.stdout == b"42\n", (r.stdout, r.stderr)
    shell = Program(argv=("sh", "-c", "cat /dev/stdin > /dev/stdout"), stdin=b"7\n")
    r = run(pool, shell)
    assert r.ok and r.stdout == b"7\n", (r.stdout, r.stderr)


def test_filled_tmpfs_does_not_pin_memory_for_the_next_check(pool: WarmPool) -> None:
    fill = (
        "import os\n"
        "for d in ('/tmp', '/work', '/dev/shm'):\n"
        "    try:\n"
        "        with open(d + '/fill', 'wb') as f:\n"
        "            while True:\n                f.write(b'x' * (1 << 20))\n"
        "    except OSError:\n        pass\n"
    )
    run(pool, py(fill))
    honest = "b = bytearray(100 << 20)\nb[::4096] = b'x' * len(b[::4096])\nprint(len(b))\n"
    for _ in range(2):
        r = run(pool, py(honest))
        assert r.ok, (r.status, r.detail, r.stderr[-300:])


def test_a_memory_limit_run_recycles_the_worker(pool: WarmPool) -> None:
    before = pool.stats().recycled
    r = run(pool, py("x = []\nwhile True:\n    x.append(bytearray(32 << 20))\n"))
    assert r.status is ExecStatus.MEMORY_LIMIT, (r.status, r.detail)
    assert pool.stats().recycled == before + 1
    assert run(pool, py("print(1)")).ok


KERNEL_OBJECTS = r"""
import ctypes, ctypes.util, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
KEY = 0x5EC2E7
MODE = sys.argv[1]
seen = {}
if MODE == 'plant':
    shm = libc.shmget(KEY, 1 << 20, 0o1666)
    if shm >= 0:
        ctypes.memmove(libc.shmat(shm, None, 0), b'SECRET', 6)
    msg = libc.msgget(KEY, 0o1666)
    buf = ctypes.create_string_buffer(b'\x01\x00\x00\x00\x00\x00\x00\x00SECRET')
    if msg >= 0:
        libc.msgsnd(msg, buf, 6, 0)
    sem = libc.semget(KEY, 1, 0o1666)
    mq = libc.mq_open(b'/forkgate-squat', os.O_CREAT | os.O_RDWR, 0o666, None)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind('\0forkgate-squat')
    s.listen(1)
    key = libc.syscall(248, b'user', b'forkgate-squat', b'SECRET', 6, -4)  # add_key, user ring
    timer = libc.timer_create(1, None, ctypes.byref(ctypes.c_void_p()))  # CLOCK_MONOTONIC
    print({'shm': shm, 'msg': msg, 'sem': sem, 'mq': mq, 'key': key, 'timer': timer})
    if len(sys.argv) > 2 and os.fork() == 0:  # a daemon that holds the socket, writes later
        os.setsid()
        time.sleep(1.0)
        open('/tmp/late', 'w').write('late')
        time.sleep(60)
    sys.exit(0)
seen['shm'] = libc.shmget(KEY, 0, 0) >= 0
seen['msg'] = libc.msgget(KEY, 0) >= 0
seen['sem'] = libc.semget(KEY, 0, 0) >= 0
seen['mq'] = libc.mq_open(b'/forkgate-squat', os.O_RDWR) >= 0
seen['sysvipc'] = [len(open('/proc/sysvipc/' + k).readlines()) - 1 for k in ('shm', 'msg', 'sem')]
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    c.connect('\0forkgate-squat')
    seen['abstract_socket'] = True
except OSError:
    seen['abstract_socket'] = False
seen['key'] = libc.syscall(249, b'user', b'forkgate-squat', None, 0) >= 0  # request_key
time.sleep(1.5)
seen['late_file'] = os.path.exists('/tmp/late')
try:
    os.mkdir('/sys/fs/cgroup/forkgate-squat')
    seen['cgroup'] = True
except OSError:
    seen['cgroup'] = False
seen['processes'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
print(seen)
"""


@pytest.mark.parametrize("inline", [True, False])
def test_no_kernel_object_outlives_its_check(pool: WarmPool, inline: bool) -> None:
    recycled = pool.stats().recycled
    planted = run(pool, _ko("plant", inline=inline))
    created = eval(planted.stdout.decode())
    # The attacker really created what the sandbox allows (else the probe proves nothing).
    assert created["shm"] >= 0 and created["msg"] >= 0 and created["sem"] >= 0, created
    assert created["mq"] >= 0 and created["timer"] == 0, created
    assert planted.anomaly is None
    probe = run(pool, _ko("probe", inline=inline))
    # The same sandbox ran both: what the attacker left was removed, not the sandbox replaced.
    assert pool.stats().recycled == recycled
    seen = eval(probe.stdout.decode())
    assert seen["sysvipc"] == [0, 0, 0], seen
    for kind in ("shm", "msg", "sem", "mq", "abstract_socket", "key", "late_file", "cgroup"):
        assert seen[kind] is False, (kind, seen)
    assert len(seen["processes"]) == 3, seen  # pid 1, the template, the probe


def test_a_daemon_and_its_delayed_write_die_with_the_check(pool: WarmPool) -> None:
    planted = run(pool, _ko("plant", "daemon"))
    assert planted.anomaly is not None and "leftover" in planted.anomaly
    probe = run(pool, _ko("probe"))
    seen = eval(probe.stdout.decode())
    assert seen["late_file"] is False and seen["abstract_socket"] is False, seen
    assert len(seen["processes"]) == 3, seen


def _ko(*args: str, inline: bool = False) -> Program:
    return Program(
        argv=("python3", "main.py", *args),
        files={"main.py": KERNEL_OBJECTS.encode()},
        inline_python=inline,
    )


DEEP = (
    "import os\nos.chdir('/tmp')\nfor i in range({n}):\n"
    "    os.mkdir('a')\n    os.chdir('a')\n"
    "    if i % 97 == 0:\n        open('f', 'w').write('x')\n"
    "os.chmod('.', 0)\nprint('deep')\n"
)


@pytest.mark.parametrize("depth", [1200, 5000])
def test_deep_nesting_gets_a_program_verdict_and_is_gone(pool: WarmPool, depth: int) -> None:
    r = run(pool, py(DEEP.format(n=depth)))
    assert r.ok and r.stdout == b"deep\n", (r.status, r.detail, r.stderr[-300:])
    after = run(pool, py("import os\nprint(os.listdir('/tmp'), os.listdir('/work'))"))
    assert after.stdout == b"[] ['run']\n", after.stdout


def test_unreadable_and_immutable_looking_trees_are_emptied(pool: WarmPool) -> None:
    code = (
        "import os\nos.makedirs('/tmp/x/y/z')\nopen('/tmp/x/y/z/f', 'w').write('1')\n"
        "os.chmod('/tmp/x/y/z', 0)\nos.chmod('/tmp/x/y', 0o500)\nos.chmod('/tmp/x', 0)\n"
        "os.symlink('/work', '/tmp/link')\nos.mkfifo('/tmp/fifo')\n"
        "try:\n    os.chmod('/tmp', 0)\nexcept OSError:\n    pass\nprint('ok')\n"
    )
    assert run(pool, py(code)).ok
    after = run(pool, py("import os\nprint(sorted(os.listdir('/tmp')))"))
    assert after.stdout == b"[]\n", after.stdout


def test_a_run_cannot_weaken_the_workers_own_processes(pool: WarmPool) -> None:
    attack = (
        "import os, resource\n"
        "for pid in {1, 2, 3, 4, 5, 6, 7, 8} - {os.getpid()}:\n"
        "    for op in (lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (4, 4)),\n"
        "               lambda: os.setpriority(os.PRIO_PROCESS, pid, 19),\n"
        "               lambda: os.kill(pid, 19)):\n"
        "        try:\n            op()\n        except OSError:\n            pass\n"
        "try:\n    os.setpriority(os.PRIO_USER, 0, 19)\nexcept OSError:\n    pass\n"
        "print('tried')\n"
    )
    r = pool.run(py(attack))
    # A program verdict, never SANDBOX_ERROR. bwrap's seccomp filter refuses the calls (OK).
    # Docker's default profile lets them through: pid 1 then cannot list /proc (its fd limit is
    # 4), kills everything, calls it interference (RUNTIME_ERROR) and the worker is replaced.
    assert r.stdout == b"tried\n", (r.status, r.detail)
    assert r.status is ExecStatus.OK or (
        r.status is ExecStatus.RUNTIME_ERROR and "interfered" in r.detail
    ), (r.status, r.detail)
    for _ in range(3):
        assert run(pool, py("print(input())", stdin=b"ok\n")).stdout == b"ok\n"


@pytest.mark.parametrize("inline", [True, False])
def test_closing_the_completion_channel_early_is_the_programs_problem(
    pool: WarmPool, inline: bool
) -> None:
    code = "import os\nos.close(4)\nos.close(3)\nprint('bye')\n"
    for _ in range(3):  # the nonce write meets a closed pipe: pid 1 must not die of it
        r = pool.run(
            Program(
                argv=("python3", "main.py"),
                files={"main.py": code.encode()},
                inline_python=inline,
                completion_channel=True,
            )
        )
        assert r.status is ExecStatus.OK and not r.completed, (r.status, r.detail)
