"""Resource limits for one sandboxed run.

Example:
    >>> from sandboxes.limits import Limits
    >>> lim = Limits(cpu_time_s=2.0, memory_bytes=256 * 2**20)
    >>> lim.wall_time_s >= lim.cpu_time_s
    True
    >>> Limits(cpu_time_s=-1)
    Traceback (most recent call last):
    ...
    sandboxes.errors.SandboxConfigError: cpu_time_s: expected a positive number, got -1

Every limit is enforced by the kernel (rlimits, cgroups, namespaces) or by the trusted
supervisor killing the whole process tree; none relies on the untrusted process cooperating.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SandboxConfigError

__all__ = ["Limits"]

_MIB = 2**20


@dataclass(frozen=True)
class Limits:
    """Limits for one run.

    Attributes:
        cpu_time_s: CPU seconds (RLIMIT_CPU; SIGXCPU then SIGKILL).
        wall_time_s: Wall-clock seconds before the whole process tree is killed.
        memory_bytes: Address-space cap per process (RLIMIT_AS) and, where cgroups are
            available, the memory cap of the whole sandbox.
        processes: Processes/threads the program may have at once (RLIMIT_NPROC on a dedicated
            uid, a cgroup ``pids`` limit where available, Docker's ``pids_limit``).
        output_bytes: Bytes kept of stdout and of stderr each; more kills the run (OUTPUT_LIMIT).
        file_size_bytes: Largest file the program may write (RLIMIT_FSIZE).
        open_files: Open file descriptors (RLIMIT_NOFILE).
        workdir_bytes: Size of the tmpfs work directory.
    """

    cpu_time_s: float = 5.0
    wall_time_s: float = 10.0
    memory_bytes: int = 512 * _MIB
    processes: int = 32
    output_bytes: int = 1 * _MIB
    file_size_bytes: int = 16 * _MIB
    open_files: int = 64
    workdir_bytes: int = 64 * _MIB

    def __post_init__(self) -> None:
        for name in ("cpu_time_s", "wall_time_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise SandboxConfigError(f"{name}: expected a positive number, got {value!r}")
        for name in (
            "memory_bytes",
            "processes",
            "output_bytes",
            "file_size_bytes",
            "open_files",
            "workdir_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SandboxConfigError(f"{name}: expected a positive integer, got {value!r}")
        if self.memory_bytes < 16 * _MIB:
            raise SandboxConfigError(f"memory_bytes: expected >= 16 MiB, got {self.memory_bytes}")
        if self.open_files < 8:
            raise SandboxConfigError(f"open_files: expected >= 8, got {self.open_files}")

    def fits_within(self, ceiling: Limits) -> bool:
        """Whether every limit is at most the corresponding limit of ``ceiling``.

        Args:
            ceiling: The limits a warm worker was started with.

        Returns:
            True when a run under ``self`` can use a worker started under ``ceiling``.
        """
        return (
            self.cpu_time_s <= ceiling.cpu_time_s
            and self.wall_time_s <= ceiling.wall_time_s
            and self.memory_bytes <= ceiling.memory_bytes
            and self.processes <= ceiling.processes
            and self.output_bytes <= ceiling.output_bytes
            and self.file_size_bytes <= ceiling.file_size_bytes
            and self.open_files <= ceiling.open_files
            and self.workdir_bytes <= ceiling.workdir_bytes
        )
