"""The outcome of one sandboxed run and how raw facts map to a typed status.

Example:
    >>> from sandboxes.result import ExecStatus, RawOutcome, classify
    >>> from sandboxes.limits import Limits
    >>> raw = RawOutcome(exit_code=0, signal=None, cpu_time_s=0.01, wall_time_s=0.02,
    ...                  peak_memory_bytes=8 << 20, stdout=b"ok\\n", stderr=b"")
    >>> classify(raw, Limits()).status
    <ExecStatus.OK: 'OK'>
    >>> import signal
    >>> classify(raw._replace(exit_code=None, signal=int(signal.SIGXCPU)), Limits()).status
    <ExecStatus.TIME_LIMIT: 'TIME_LIMIT'>
"""

from __future__ import annotations

import enum
import signal as _signal
from dataclasses import dataclass
from typing import NamedTuple

from .limits import Limits

__all__ = ["ExecResult", "ExecStatus", "RawOutcome", "classify"]


class ExecStatus(enum.Enum):
    """Typed status of a run."""

    OK = "OK"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    TIME_LIMIT = "TIME_LIMIT"
    MEMORY_LIMIT = "MEMORY_LIMIT"
    OUTPUT_LIMIT = "OUTPUT_LIMIT"
    SANDBOX_ERROR = "SANDBOX_ERROR"


class RawOutcome(NamedTuple):
    """What the trusted supervisor observed, before classification."""

    exit_code: int | None
    signal: int | None
    cpu_time_s: float
    wall_time_s: float
    peak_memory_bytes: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    killed_for: str | None = None  # "wall" | "overload" | "output" | "interference" | None
    oom_killed: bool = False  # the cgroup/engine reported an out-of-memory kill
    completed: bool = False
    anomaly: str | None = None  # leftovers the supervisor had to clean (worker is recycled)


@dataclass(frozen=True)
class ExecResult:
    """The result of one run.

    Attributes:
        status: The typed outcome.
        exit_code: The exit status when the program exited, else None.
        signal: The signal that ended the program, else None.
        stdout: Standard output, at most ``Limits.output_bytes``.
        stderr: Standard error, at most ``Limits.output_bytes``.
        stdout_truncated: More stdout was produced than kept.
        stderr_truncated: More stderr was produced than kept.
        cpu_time_s: CPU time of the program and its children.
        wall_time_s: Wall time from start to the end of the process tree.
        peak_memory_bytes: Peak resident set of the largest process.
        completed: The completion channel received the run's nonce (see ``Program``).
        detail: A short human-readable reason for a non-OK status.
        anomaly: What the supervisor had to clean up after the run (leftover processes, ...).
        died_during_run: SANDBOX_ERROR only: the sandbox died or broke off while the program ran
            (rather than before it started). The program may have caused that; a caller that
            must attribute it runs the program once more in a fresh sandbox.
        host_overloaded: SANDBOX_ERROR only: the wall limit stopped a run that waited for a CPU
            it never got (see ``worker._overload``); not the program's doing, worth a retry.
    """

    status: ExecStatus
    exit_code: int | None
    signal: int | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    cpu_time_s: float
    wall_time_s: float
    peak_memory_bytes: int
    completed: bool = False
    detail: str = ""
    anomaly: str | None = None
    died_during_run: bool = False
    host_overloaded: bool = False

    @property
    def ok(self) -> bool:
        """Whether the program exited 0 within every limit."""
        return self.status is ExecStatus.OK

    @classmethod
    def sandbox_error(
        cls, detail: str, *, wall_time_s: float = 0.0, during_run: bool = False
    ) -> ExecResult:
        """A result for a failure of the sandbox machinery.

        Args:
            detail: What went wrong.
            wall_time_s: Time spent before the failure.
            during_run: The sandbox died while the program ran (see ``died_during_run``).

        Returns:
            An ``ExecResult`` with status ``SANDBOX_ERROR``.
        """
        return cls(
            status=ExecStatus.SANDBOX_ERROR,
            exit_code=None,
            signal=None,
            stdout=b"",
            stderr=b"",
            stdout_truncated=False,
            stderr_truncated=False,
            cpu_time_s=0.0,
            wall_time_s=wall_time_s,
            peak_memory_bytes=0,
            detail=detail,
            anomaly=detail,
            died_during_run=during_run,
        )


def _signal_name(signum: int) -> str:
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def classify(raw: RawOutcome, limits: Limits) -> ExecResult:
    """Map what the supervisor observed to a typed status.

    Args:
        raw: The supervisor's observations.
        limits: The limits the run had.

    Returns:
        The ``ExecResult``.
    """
    status, detail = _status(raw, limits)
    return ExecResult(
        status=status,
        exit_code=raw.exit_code,
        signal=raw.signal,
        stdout=raw.stdout,
        stderr=raw.stderr,
        stdout_truncated=raw.stdout_truncated,
        stderr_truncated=raw.stderr_truncated,
        cpu_time_s=raw.cpu_time_s,
        wall_time_s=raw.wall_time_s,
        peak_memory_bytes=raw.peak_memory_bytes,
        completed=raw.completed,
        detail=detail,
        anomaly=raw.anomaly,
        host_overloaded=raw.killed_for == "overload",
    )


def _status(raw: RawOutcome, limits: Limits) -> tuple[ExecStatus, str]:
    if raw.killed_for == "output":
        return ExecStatus.OUTPUT_LIMIT, f"output exceeded {limits.output_bytes} bytes"
    if raw.killed_for == "interference":
        return ExecStatus.RUNTIME_ERROR, "the program interfered with its sandbox's supervisor"
    if raw.killed_for == "overload":  # see worker._overload: the host's fault, retry
        return ExecStatus.SANDBOX_ERROR, f"{raw.anomaly}; not the program's fault, retry"
    if raw.killed_for == "wall":
        return ExecStatus.TIME_LIMIT, f"wall time exceeded {limits.wall_time_s:g} s"
    sig = raw.signal
    if sig == _signal.SIGXCPU or (
        sig == _signal.SIGKILL and raw.cpu_time_s >= limits.cpu_time_s * 0.95
    ):
        return ExecStatus.TIME_LIMIT, f"CPU time exceeded {limits.cpu_time_s:g} s"
    if sig == _signal.SIGXFSZ:
        return ExecStatus.OUTPUT_LIMIT, f"a file exceeded {limits.file_size_bytes} bytes"
    if raw.oom_killed:
        return ExecStatus.MEMORY_LIMIT, f"memory exceeded {limits.memory_bytes} bytes"
    if raw.exit_code == 0 and sig is None:
        return ExecStatus.OK, ""
    # MEMORY_LIMIT comes only from the kernel's OOM counter above, never from what the program
    # printed: "MemoryError" on stderr is the program's own error (and forces no recycle).
    if sig is not None:
        return ExecStatus.RUNTIME_ERROR, f"killed by {_signal_name(sig)}"
    return ExecStatus.RUNTIME_ERROR, f"exit code {raw.exit_code}"
