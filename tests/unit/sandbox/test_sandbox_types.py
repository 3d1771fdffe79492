"""Limits, Program validation, status classification and the seccomp program's shape."""

from __future__ import annotations

import signal
import struct

import pytest

from sandboxes import ExecStatus, Limits, Program, SandboxConfigError
from sandboxes.result import RawOutcome, classify
from sandboxes.seccomp import DENIED_SYSCALLS_X86_64, deny_list_filter

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
        ({"oom_killed": True, "exit_code": None, "signal": 9}, ExecStatus.MEMORY_LIMIT),
        ({"exit_code": 1, "stderr": b"...\nMemoryError\n"}, ExecStatus.MEMORY_LIMIT),
        ({"exit_code": None, "signal": 6, "stderr": b"std::bad_alloc"}, ExecStatus.MEMORY_LIMIT),
        # A program printing a marker cannot turn a clean exit into anything but OK or a
        # failure of its own making; a clean exit with the marker is still OK (exit 0).
        ({"stderr": b"MemoryError"}, ExecStatus.OK),
    ],
)
def test_classify(changes: dict[str, object], status: ExecStatus) -> None:
    result = classify(RAW._replace(**changes), Limits(cpu_time_s=5.0))
    assert result.status is status
    assert (result.detail == "") == (status is ExecStatus.OK)


def test_seccomp_program_is_well_formed() -> None:
    prog = deny_list_filter()
    if prog is None:
        pytest.skip("seccomp filter is x86-64 only; this machine is not")
    insns = [struct.unpack("<HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    assert len(insns) == 6 + len(set(DENIED_SYSCALLS_X86_64.values())) + 2
    assert insns[-2] == (0x06, 0, 0, 0x7FFF0000)  # allow
    assert insns[-1][3] & 0xFFFF0000 == 0x00050000  # errno
    # Every JEQ on a syscall number lands on the errno return.
    for idx, (code, jt, _, _) in enumerate(insns[6:-2], start=6):
        assert code == 0x15 and idx + 1 + jt == len(insns) - 1
