"""Per-worker cgroups: a memory and a pids limit for one whole sandbox, where the machine allows.

Example:
    >>> from sandboxes.cgroups import probe_cgroups
    >>> support = probe_cgroups()
    >>> support.version in (None, 1, 2)
    True

cgroup v2 (the unified hierarchy) is preferred: ``<root>/forkgate-sandboxes/<worker>`` with
``memory.max``, ``memory.swap.max`` and ``pids.max``. On a machine still on cgroup v1 with
writable ``memory`` and ``pids`` hierarchies the same limits go to ``memory.limit_in_bytes`` and
``pids.max``. Without either (no root, a read-only cgroupfs) ``probe_cgroups`` says why, the
backend falls back to rlimits alone, and ``certd doctor`` reports it.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CgroupSupport", "WorkerCgroup", "probe_cgroups"]

_ROOT = Path("/sys/fs/cgroup")
_GROUP = "forkgate-sandboxes"


@dataclass(frozen=True)
class CgroupSupport:
    """What this machine allows.

    Attributes:
        version: 2, 1, or None when no usable hierarchy was found.
        reason: Why cgroups are unavailable ('' when they are available).
    """

    version: int | None
    reason: str = ""


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
        return CgroupSupport(2)
    if _writable_dir(root / "memory") and _writable_dir(root / "pids"):
        try:
            for ctl in ("memory", "pids"):
                (root / ctl / _GROUP).mkdir(exist_ok=True)
        except OSError as exc:
            return CgroupSupport(None, f"cannot create cgroup v1 groups: {exc}")
        return CgroupSupport(1)
    return CgroupSupport(None, "no writable cgroup v2 or v1 memory+pids hierarchy")


class WorkerCgroup:
    """The cgroup(s) of one sandbox worker. Create, join via ``procs_files``, then ``remove``."""

    def __init__(self, support: CgroupSupport, memory_bytes: int, pids: int, root: Path = _ROOT):
        """Create the group and set its limits.

        Args:
            support: What ``probe_cgroups`` found (version must not be None).
            memory_bytes: Memory cap of the whole sandbox (processes and its tmpfs pages).
            pids: Most tasks (processes and threads) in the sandbox at once.
            root: The cgroupfs mount point.

        Raises:
            OSError: When the kernel refuses to create the group or set a limit.
        """
        name = f"w-{uuid.uuid4().hex[:12]}"
        self.version = support.version
        if support.version == 2:
            self.dirs = [root / _GROUP / name]
            self.dirs[0].mkdir()
            (self.dirs[0] / "memory.max").write_text(str(memory_bytes))
            swap = self.dirs[0] / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
            (self.dirs[0] / "pids.max").write_text(str(pids))
        else:
            self.dirs = [root / "memory" / _GROUP / name, root / "pids" / _GROUP / name]
            for d in self.dirs:
                d.mkdir()
            (self.dirs[0] / "memory.limit_in_bytes").write_text(str(memory_bytes))
            (self.dirs[1] / "pids.max").write_text(str(pids))

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
