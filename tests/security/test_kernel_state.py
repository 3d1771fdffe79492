"""Kernel state a run can set stays out of the next run, by construction, on both backends.

Issue 29: IPC sysctls written by one run persisted to later runs (bwrap); ``ioprio_set`` on
pid 1 and the template put every later run in the idle I/O class (both backends); Docker let
``io_uring_setup``, AF_VSOCK sockets and cross-process ``prlimit``/``setpriority`` through; a
program printing "MemoryError" forced a recycle. Every test runs the attack in a real sandbox
(bubblewrap, a real Docker engine), then a probe in the same warm worker.
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
from sandboxes.seccomp import SELF_ONLY_SYSCALLS_X86_64

LIMITS = Limits(
    cpu_time_s=3.0,
    wall_time_s=6.0,
    memory_bytes=256 * 2**20,
    processes=16,
    output_bytes=64 * 1024,
    file_size_bytes=1 * 2**20,
    open_files=64,
    workdir_bytes=16 * 2**20,
)

SYSCTLS = (
    "kernel/shmmax",
    "kernel/shmall",
    "kernel/shmmni",
    "kernel/msgmax",
    "kernel/msgmnb",
    "kernel/msgmni",
    "kernel/sem",
    "fs/mqueue/queues_max",
    "fs/mqueue/msg_max",
    "fs/mqueue/msgsize_max",
    "fs/mqueue/msg_default",
    "fs/mqueue/msgsize_default",
)

READ_SYSCTLS = f"""
import json
out = {{}}
for name in {SYSCTLS!r}:
    try:
        out[name] = open('/proc/sys/' + name).read()
    except OSError as exc:
        out[name] = 'unreadable'
print(json.dumps(out))
"""

WRITE_SYSCTLS = f"""
import json
refused = {{}}
for name in {SYSCTLS!r}:
    value = '8 8 8 8' if name == 'kernel/sem' else '8'
    try:
        with open('/proc/sys/' + name, 'w') as f:
            f.write(value)
        refused[name] = False
    except OSError:
        refused[name] = True
print(json.dumps(refused))
"""

# Every syscall that takes a pid (or who) and changes or reads into another process, aimed at
# pid 1 and at the template (the inline run's parent). 0 = the kernel let it through.
PID_ATTACKS = r"""
import ctypes, json, os, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(L(nr), *(L(a) for a in args))
    return 0 if r >= 0 else ctypes.get_errno()
buf = ctypes.create_string_buffer(256)
addr = ctypes.addressof(buf)
iov = struct.pack('QQ', addr, 8)
iovb = ctypes.create_string_buffer(iov, len(iov))
attr = ctypes.create_string_buffer(struct.pack('IIQiIQQQ', 56, 5, 0, 0, 0, 0, 0, 0), 56)
rlim = ctypes.create_string_buffer(struct.pack('QQ', 8, 8), 16)
mask = ctypes.create_string_buffer(struct.pack('Q', 1), 8)
out = {}
for label, pid in (('pid1', 1), ('template', os.getppid())):
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        pidfd = -1
    tries = {
        'setpriority': (141, 0, pid, 19),
        'setpriority_user': (141, 2, 0, 19),
        'sched_setparam': (142, pid, addr),
        'sched_setscheduler': (144, pid, 5, addr),
        'sched_setaffinity': (203, pid, 8, ctypes.addressof(mask)),
        'ioprio_set': (251, 1, pid, 3 << 13),
        'ioprio_set_user': (251, 3, 0, 3 << 13),
        'migrate_pages': (256, pid, 64, addr, addr),
        'get_robust_list': (274, pid, addr, addr + 8),
        'move_pages': (279, pid, 0, 0, 0, 0, 0),
        'prlimit64': (302, pid, 7, ctypes.addressof(rlim), 0),
        'sched_setattr': (314, pid, ctypes.addressof(attr), 0),
        'ptrace': (101, 16, pid, 0, 0),
        'process_vm_writev': (311, pid, ctypes.addressof(iovb), 1, ctypes.addressof(iovb), 1, 0),
        'process_vm_readv': (310, pid, ctypes.addressof(iovb), 1, ctypes.addressof(iovb), 1, 0),
        'kcmp': (312, pid, os.getpid(), 0, 0, 0),
        'pidfd_getfd': (438, pidfd, 0, 0),
        'process_madvise': (440, pidfd, ctypes.addressof(iovb), 1, 20, 0),
    }
    for name, args in tries.items():
        out[label + ':' + name] = call(*args)
    try:
        with open(f'/proc/{pid}/timerslack_ns', 'w') as f:
            f.write('50000000')
        out[label + ':timerslack'] = 0
    except OSError as exc:
        out[label + ':timerslack'] = exc.errno or -1
out['io_uring_setup'] = call(425, 4, addr)
try:
    socket.socket(40, socket.SOCK_STREAM).close()
    out['socket_af_vsock'] = 0
except OSError as exc:
    out['socket_af_vsock'] = exc.errno or -1
print(json.dumps(out))
"""

# What a run inherits from whoever started it: a later run prints it.
INHERITED = r"""
import ctypes, json, os, resource
libc = ctypes.CDLL(None)
print(json.dumps({
    'nice': os.getpriority(os.PRIO_PROCESS, 0),
    'ioprio': libc.syscall(ctypes.c_long(252), ctypes.c_long(1), ctypes.c_long(0)),
    'policy': os.sched_getscheduler(0),
    'affinity': sorted(os.sched_getaffinity(0)),
    'nofile': resource.getrlimit(resource.RLIMIT_NOFILE),
    'timerslack': libc.prctl(30, 0, 0, 0, 0),
}))
"""


@pytest.fixture(scope="module", params=BACKENDS)
def pool(request: pytest.FixtureRequest) -> Iterator[WarmPool]:
    box = make_backend(request.param, LIMITS)
    with WarmPool(box, size=1, max_runs=1000) as p:
        assert p.wait_ready(120), "the worker did not start"
        yield p
    box.close()


def py(code: str, inline: bool = False) -> Program:
    return Program(
        argv=("python3", "main.py"), files={"main.py": code.encode()}, inline_python=inline
    )


def run(pool: WarmPool, program: Program) -> ExecResult:
    return pool.run(program, LIMITS)


def printed(pool: WarmPool, program: Program) -> dict[str, object]:
    r = run(pool, program)
    assert r.ok, (r.status, r.detail, r.stderr[-300:])
    value: dict[str, object] = json.loads(r.stdout)
    return value


def test_ipc_sysctls_cannot_be_written_and_never_reach_a_later_run(pool: WarmPool) -> None:
    before = printed(pool, py(READ_SYSCTLS))
    assert "unreadable" not in before.values(), before  # the probe sees them
    refused = printed(pool, py(WRITE_SYSCTLS))
    assert all(refused.values()), refused
    assert printed(pool, py(READ_SYSCTLS)) == before


def test_shm_program_stays_correct_after_a_sysctl_attack(pool: WarmPool) -> None:
    shm = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    shm += "ident = libc.shmget(0, 4 << 20, 0o1600)\nassert ident >= 0, ctypes.get_errno()\n"
    shm += "libc.shmctl(ident, 0, None)\nprint('ok')\n"
    assert run(pool, py(shm)).ok
    run(pool, py(WRITE_SYSCTLS))
    r = run(pool, py(shm))
    assert r.ok, (r.status, r.stderr[-300:])


@pytest.mark.parametrize("inline", [False, True])
def test_pid_taking_syscalls_cannot_reach_pid1_or_the_template(
    pool: WarmPool, inline: bool
) -> None:
    baseline = printed(pool, py(INHERITED, inline=True)), printed(pool, py(INHERITED))
    hits = printed(pool, py(PID_ATTACKS, inline=True))
    let_through = sorted(k for k, v in hits.items() if v == 0)
    assert not let_through, let_through  # refused (seccomp, the kernel), never detected later
    for name in SELF_ONLY_SYSCALLS_X86_64:  # the test covers the whole list of the filter
        assert f"pid1:{name}" in hits and f"template:{name}" in hits, name
    # What later runs inherit (forked from the template, or exec'd from pid 1) is unchanged.
    after = printed(pool, py(INHERITED, inline=True)), printed(pool, py(INHERITED))
    assert after == baseline
    assert printed(pool, py(INHERITED, inline=inline)) == baseline[0 if inline else 1]


def test_printed_memory_error_is_the_programs_error_and_recycles_nothing(pool: WarmPool) -> None:
    before = pool.stats().recycled
    fake = "import sys\nsys.stderr.write('Traceback\\nMemoryError\\nstd::bad_alloc\\n')\n"
    r = run(pool, py(fake + "sys.exit(1)\n"))
    assert (r.status, r.exit_code) == (ExecStatus.RUNTIME_ERROR, 1), r.detail
    assert run(pool, py(fake)).ok
    assert pool.stats().recycled == before


def test_a_real_memory_bomb_is_a_memory_limit_from_the_kernel(pool: WarmPool) -> None:
    bomb = "x = []\nwhile True:\n    x.append(bytearray(32 << 20))\n"
    r = run(pool, py(bomb))
    assert r.status is ExecStatus.MEMORY_LIMIT, (r.status, r.detail, r.stderr[-200:])
    assert run(pool, py("print(1)")).ok
