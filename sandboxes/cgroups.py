"""Per-worker cgroups: memory, pids and CPU limits for one whole sandbox, where the machine allows.

Example:
    >>> from sandboxes.cgroups import probe_cgroups
    >>> support = probe_cgroups()
    >>> support.version in (None, 1, 2)
    True

cgroup v2 (the unified hierarchy) is preferred: ``<root>/forkgate-sandboxes/<worker>`` with
``memory.max``, ``memory.swap.max``, ``pids.max``, ``cpu.max`` and ``cpu.weight``. On a machine
still on cgroup v1 with writable ``memory`` and ``pids`` hierarchies the same limits go to
``memory.limit_in_bytes``, ``pids.max`` and (where the ``cpu``/``cpuacct`` hierarchies are
writable) ``cpu.cfs_quota_us``/``cpu.shares``. The CPU controller makes every process of a worker
share one budget however many sessions (scheduler autogroups) it creates, so a neighbour's busy
children cannot starve another worker's run. Without cgroups (no root, a read-only cgroupfs)
``probe_cgroups`` says why, the backend falls back to rlimits alone, and ``certd doctor``
reports it.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CgroupSupport", "WorkerCgroup", "probe_cgroups"]

_ROOT = Path("/sys/fs/cgroup")
_GROUP = "forkgate-sandboxes"
_PERIOD_US = 100_000


@dataclass(frozen=True)
class CgroupSupport:
    """What this machine allows.

    Attributes:
        version: 2, 1, or None when no usable hierarchy was found.
        reason: Why cgroups are unavailable ('' when they are available).
        cpu: Whether a CPU controller (and a CPU usage counter) can be set per worker.
    """

    version: int | None
    reason: str = ""
    cpu: bool = False


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def probe_cgroups(root: Path = _ROOT) -> CgroupSupport:
    """Find a cgroup hierarchy this process may create sandboxes' groups in.

    Args:
        root: The cgroupfs mount point.

    Returns:
        The support found; ``version`` None with a reason when there is none.
    """
    if (root / "cgroup.controllers").is_file():
        controllers = (root / "cgroup.controllers").read_text().split()
        if not {"memory", "pids"} <= set(controllers):
            return CgroupSupport(None, f"cgroup v2 lacks memory/pids controllers ({controllers})")
        if not _writable_dir(root):
            return CgroupSupport(None, "cgroup v2 hierarchy is not writable (not root?)")
        try:
            (root / _GROUP).mkdir(exist_ok=True)
            enabled = (root / "cgroup.subtree_control").read_text().split()
            for ctl in ("memory", "pids"):
                if ctl not in enabled:
                    (root / "cgroup.subtree_control").write_text(f"+{ctl}")
            (root / _GROUP / "cgroup.subtree_control").write_text("+memory +pids")
        except OSError as exc:
            return CgroupSupport(None, f"cannot delegate memory/pids in cgroup v2: {exc}")
        return CgroupSupport(2, cpu=_delegate_cpu_v2(root, controllers))
    if _writable_dir(root / "memory") and _writable_dir(root / "pids"):
        cpu = _writable_dir(root / "cpu") and _writable_dir(root / "cpuacct")
        try:
            for ctl in ("memory", "pids") + (("cpu", "cpuacct") if cpu else ()):
                (root / ctl / _GROUP).mkdir(exist_ok=True)
        except OSError as exc:
            return CgroupSupport(None, f"cannot create cgroup v1 groups: {exc}")
        return CgroupSupport(1, cpu=cpu)
    return CgroupSupport(None, "no writable cgroup v2 or v1 memory+pids hierarchy")


def _delegate_cpu_v2(root: Path, controllers: list[str]) -> bool:
    if "cpu" not in controllers:
        return False
    try:
        if "cpu" not in (root / "cgroup.subtree_control").read_text().split():
            (root / "cgroup.subtree_control").write_text("+cpu")
        (root / _GROUP / "cgroup.subtree_control").write_text("+cpu")
    except OSError:
        return False
    return True


class WorkerCgroup:
    """The cgroup(s) of one sandbox worker. Create, join via ``procs_files``, then ``remove``."""

    def __init__(
        self,
        support: CgroupSupport,
        memory_bytes: int,
        pids: int,
        root: Path = _ROOT,
        cpus: float = 1.0,
    ):
        """Create the group and set its limits.

        Args:
            support: What ``probe_cgroups`` found (version must not be None).
            memory_bytes: Memory cap of the whole sandbox (processes and its tmpfs pages).
            pids: Most tasks (processes and threads) in the sandbox at once.
            root: The cgroupfs mount point.
            cpus: CPUs the whole sandbox may use at once (where ``support.cpu``).

        Raises:
            OSError: When the kernel refuses to create the group or set a limit.
        """
        name = f"w-{uuid.uuid4().hex[:12]}"
        self.version = support.version
        self.memory_max = memory_bytes
        quota = f"{max(1000, int(cpus * _PERIOD_US))}"
        if support.version == 2:
            self.dirs = [root / _GROUP / name]
            self.dirs[0].mkdir()
            (self.dirs[0] / "memory.max").write_text(str(memory_bytes))
            swap = self.dirs[0] / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
            (self.dirs[0] / "pids.max").write_text(str(pids))
            self._cpu_dir: Path | None = self.dirs[0] if support.cpu else None
            if self._cpu_dir is not None:
                (self._cpu_dir / "cpu.max").write_text(f"{quota} {_PERIOD_US}")
                (self._cpu_dir / "cpu.weight").write_text("100")
            return
        self.dirs = [root / "memory" / _GROUP / name, root / "pids" / _GROUP / name]
        self._cpu_dir = None
        if support.cpu:  # "cpu" and "cpuacct" may be one hierarchy mounted twice
            cpu = root / "cpu" / _GROUP / name
            acct = root / "cpuacct" / _GROUP / name
            same = (root / "cpu").resolve() == (root / "cpuacct").resolve()
            self.dirs += [cpu] if same else [cpu, acct]
            self._cpu_dir = cpu if same else acct
        for d in self.dirs:
            d.mkdir()
        (self.dirs[0] / "memory.limit_in_bytes").write_text(str(memory_bytes))
        (self.dirs[1] / "pids.max").write_text(str(pids))
        if support.cpu:
            (self.dirs[2] / "cpu.cfs_period_us").write_text(str(_PERIOD_US))
            (self.dirs[2] / "cpu.cfs_quota_us").write_text(quota)
            (self.dirs[2] / "cpu.shares").write_text("1024")

    def cpu_seconds(self) -> float | None:
        """CPU seconds every process of the group has used so far, exited ones included.

        Returns:
            The seconds, or None when the group has no CPU counter (or it cannot be read).
        """
        if self._cpu_dir is None:
            return None
        try:
            if self.version == 2:
                for line in (self._cpu_dir / "cpu.stat").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return int(value) / 1e6
                return None
            return int((self._cpu_dir / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def set_memory(self, memory_bytes: int) -> bool:
        """Set the group's memory cap for the next run.

        Args:
            memory_bytes: The cap: the run's memory plus the room of the tmpfs and pid 1.

        Returns:
            True when the cap is in place; False when the kernel refused it (e.g. usage above).
        """
        if memory_bytes == self.memory_max:
            return True
        name = "memory.max" if self.version == 2 else "memory.limit_in_bytes"
        try:
            (self.dirs[0] / name).write_text(str(memory_bytes))
        except OSError:
            return False
        self.memory_max = memory_bytes
        return True

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes its pid to, to join."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has killed in this group so far."""
        path = self.dirs[0] / ("memory.events" if self.version == 2 else "memory.oom_control")
        try:
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except OSError:
            return 0
        return 0

    def remove(self) -> None:
        """Remove the group(s); the processes must have exited."""
        for d in self.dirs:
            try:
                d.rmdir()
            except OSError:
                pass
