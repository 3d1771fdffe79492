"""Limits, Program validation, status classification, the seccomp program, the zygote's parts."""

from __future__ import annotations

import os
import signal
import struct
import time
from pathlib import Path

import pytest

from sandboxes import ExecStatus, Limits, Program, SandboxConfigError
from sandboxes._cleanup import _empty_dir
from sandboxes.result import RawOutcome, classify
from sandboxes.seccomp import DENIED_SYSCALLS_X86_64, SELF_ONLY_SYSCALLS_X86_64, deny_list_filter
from sandboxes.worker import zygote_source

RAW = RawOutcome(
    exit_code=0,
    signal=None,
    cpu_time_s=0.1,
    wall_time_s=0.1,
    peak_memory_bytes=1,
    stdout=b"",
    stderr=b"",
)


@pytest.mark.parametrize(
    "kw",
    [
        {"cpu_time_s": 0},
        {"wall_time_s": -1.0},
        {"memory_bytes": 1024},
        {"processes": 0},
        {"output_bytes": True},
        {"open_files": 2},
    ],
)
def test_bad_limits_are_refused(kw: dict[str, object]) -> None:
    with pytest.raises(SandboxConfigError):
        Limits(**kw)  # type: ignore[arg-type]


def test_fits_within() -> None:
    assert Limits(cpu_time_s=1).fits_within(Limits(cpu_time_s=2))
    assert not Limits(processes=99).fits_within(Limits(processes=10))


@pytest.mark.parametrize(
    "kw",
    [
        {"argv": ()},
        {"argv": ("a\0b",)},
        {"argv": ("x",), "files": {"a/b": b""}},
        {"argv": ("x",), "files": {"..": b""}},
        {"argv": ("x",), "executables": frozenset({"nope"})},
        {"argv": ("python3", "main.py"), "inline_python": True},
    ],
)
def test_bad_programs_are_refused(kw: dict[str, object]) -> None:
    with pytest.raises(SandboxConfigError):
        Program(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "status"),
    [
        ({}, ExecStatus.OK),
        ({"exit_code": 1}, ExecStatus.RUNTIME_ERROR),
        ({"exit_code": None, "signal": int(signal.SIGSEGV)}, ExecStatus.RUNTIME_ERROR),
        ({"exit_code": None, "signal": int(signal.SIGXCPU)}, ExecStatus.TIME_LIMIT),
        ({"exit_code": None, "signal": 9, "cpu_time_s": 5.0}, ExecStatus.TIME_LIMIT),
        ({"exit_code": None, "signal": 9}, ExecStatus.RUNTIME_ERROR),
        ({"exit_code": None, "signal": int(signal.SIGXFSZ)}, ExecStatus.OUTPUT_LIMIT),
        ({"killed_for": "wall"}, ExecStatus.TIME_LIMIT),
        ({"killed_for": "output"}, ExecStatus.OUTPUT_LIMIT),
        ({"killed_for": "interference"}, ExecStatus.RUNTIME_ERROR),
        ({"oom_killed": True, "exit_code": None, "signal": 9}, ExecStatus.MEMORY_LIMIT),
        # MEMORY_LIMIT comes from the kernel's OOM counter only: what a program prints is its
        # own business (issue 29: "MemoryError" on stderr forced a recycle on every check).
        ({"exit_code": 1, "stderr": b"...\nMemoryError\n"}, ExecStatus.RUNTIME_ERROR),
        ({"exit_code": None, "signal": 6, "stderr": b"std::bad_alloc"}, ExecStatus.RUNTIME_ERROR),
        ({"stderr": b"MemoryError"}, ExecStatus.OK),
        ({"killed_for": "overload", "anomaly": "host overloaded"}, ExecStatus.SANDBOX_ERROR),
    ],
)
def test_classify(changes: dict[str, object], status: ExecStatus) -> None:
    result = classify(RAW._replace(**changes), Limits(cpu_time_s=5.0))
    assert result.status is status
    assert (result.detail == "") == (status is ExecStatus.OK)


def _run_bpf(prog: bytes, nr: int, args: tuple[int, ...] = (), arch: int = 0xC000003E) -> int:
    """A reference interpreter of the few classic-BPF instructions the filter uses."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    insns = [struct.unpack("<HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # LD W ABS
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x15:  # JEQ K
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x35:  # JGE K
            pc += 1 + (jt if acc >= k else jf)
        elif code == 0x06:  # RET K
            return int(k)
        else:
            raise AssertionError(f"unexpected BPF opcode {code:#x}")


def test_seccomp_program_is_well_formed() -> None:
    prog = deny_list_filter()
    if prog is None:
        pytest.skip("seccomp filter is x86-64 only; this machine is not")
    allow, eperm, kill = 0x7FFF0000, 0x00050000 | 1, 0x80000000
    assert _run_bpf(prog, 39) == allow  # getpid
    for nr in DENIED_SYSCALLS_X86_64.values():
        assert _run_bpf(prog, nr) == eperm
    assert _run_bpf(prog, 39 | 0x40000000) == kill  # x32
    assert _run_bpf(prog, 39, arch=0x40000003) == kill  # i386
    # Calls on the caller itself pass; aimed at another process (pid 1, the template) they fail.
    for name, (nr, checked) in SELF_ONLY_SYSCALLS_X86_64.items():
        own = dict(checked)
        mine = tuple(own.get(i, 0) for i in range(3))
        assert _run_bpf(prog, nr, (*mine[:2], 5)) == allow, name
        for arg, expect in checked:
            for value in (1, 2, 3, 1 << 32, 0xFFFFFFFF):
                if value == expect:
                    continue
                args = tuple(value if i == arg else mine[i] for i in range(3))
                assert _run_bpf(prog, nr, args) == eperm, (name, args)
    assert _run_bpf(prog, 41, (40, 1, 0)) == eperm  # socket(AF_VSOCK)
    assert _run_bpf(prog, 41, (1, 1, 0)) == allow  # socket(AF_UNIX)


def test_zygote_source_carries_the_template_and_the_cleanup() -> None:
    src = zygote_source()
    compile(src, "<zygote>", "exec")
    assert "_TEMPLATE_SOURCE = '" in src and "def cleanup(" in src and "def _empty_dir(" in src


def test_emptying_a_deep_unreadable_tree_needs_no_recursion(tmp_path: Path) -> None:
    top = tmp_path / "top"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for i in range(3000):  # deeper than the recursion limit, longer than PATH_MAX as one path
        os.mkdir("a", dir_fd=fd)
        if i % 500 == 0:
            os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
        sub = os.open("a", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = sub
    os.fchmod(fd, 0o300)
    os.close(fd)
    os.mkfifo(top / "fifo")
    (top / "link").symlink_to("/")
    assert _empty_dir(str(top), time.monotonic() + 60)
    assert os.listdir(top) == []


def test_a_starved_wall_kill_is_host_overload_to_retry_not_a_time_limit() -> None:
    raw = RAW._replace(exit_code=None, signal=9, killed_for="overload", anomaly="host overloaded")
    result = classify(raw, Limits(cpu_time_s=5.0))
    assert result.status is ExecStatus.SANDBOX_ERROR and result.host_overloaded
    assert not result.died_during_run and "retry" in result.detail
    assert not classify(RAW._replace(killed_for="wall"), Limits()).host_overloaded
