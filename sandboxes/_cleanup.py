"""Returning a sandbox to its start state after a run, and checking that it is (stdlib only).

Example (inside a sandbox, as pid 1)::

    kill_except(None)                         # every other process of the namespace goes
    left = cleanup(self_state(), keep=None)   # [] when the sandbox is empty again

Children that ``kill_except`` reaps are recorded, so ``collect(pid)`` still returns a run's
exit status and resource usage after the run was killed.

The zygote runs this as part of its own source: ``worker.zygote_source()`` inlines everything
below the ``inline`` marker into ``_zygote.py``. Nothing here recurses: a directory tree is
emptied by an explicit stack of directory fds, and a tree deeper than ``_WIPE_DEPTH`` is cut
into pieces moved up to the top, so neither Python's stack nor the open fds grow with depth.
Whatever cannot be removed or verified is reported, and the supervisor replaces the sandbox.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import time
from typing import Any

__all__ = [
    "cleanup",
    "collect",
    "exited",
    "kill_except",
    "open_pidfd",
    "other_pids",
    "run_delay",
    "self_state",
]

# ---- inline: worker.zygote_source() copies everything below into the zygote ----
_WIPE = ("/work", "/tmp", "/dev/shm")
_MQUEUE = "/dev/mqueue"
_SYSVIPC = ("shm", "msg", "sem")
_WIPE_BUDGET_S = 5.0  # longer than this and the sandbox is replaced instead
_WIPE_DEPTH = 32  # deeper directories are moved up to the top instead of descended into
_IPC_RMID = 0
_IPC_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_GET_TIMERSLACK = 30
_SYS_IOPRIO_GET = 252 if os.uname().machine == "x86_64" else None
_IOPRIO_WHO_PROCESS = 1
_REAPED: dict[int, tuple[int, Any]] = {}  # children reaped while killing: pid -> (status, usage)
_RLIMITS = tuple(getattr(resource, n) for n in dir(resource) if n.startswith("RLIMIT_"))


def open_pidfd(pid: int) -> int:
    """A pidfd of the run; -1 where the kernel has none (gVisor: the zygote polls ``exited``)."""
    try:
        return os.pidfd_open(pid)
    except OSError as exc:
        if exc.errno != errno.ENOSYS:
            raise
        return -1


def exited(pid: int) -> bool:
    """Whether the run has exited (a zombie, or reaped by the template), without a pidfd."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def other_pids() -> list[int]:
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]


def _kill_all() -> None:
    try:
        os.kill(-1, signal.SIGKILL)  # as pid 1: every process of the namespace but itself
    except ProcessLookupError:
        pass


def _reap_nohang() -> None:
    """Reap every child that has exited; ``collect`` hands out what each one left."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _REAPED[pid] = (status, usage)


def collect(pid: int) -> tuple[int, Any] | None:
    """Wait for child ``pid`` (or take what an earlier reap recorded)."""
    if pid in _REAPED:
        return _REAPED.pop(pid)
    try:
        _, status, usage = os.wait4(pid, 0)
    except ChildProcessError:
        return None
    return status, usage


def kill_except(keep: int | None) -> None:
    """Kill every process of the namespace but pid 1 and ``keep``, until none is left.

    When that does not settle (or /proc cannot be listed) everything goes, template included;
    a missing template is started again for the next inline run.
    """
    if keep is None or not _kill_others(keep):
        _kill_all()
    _reap_nohang()


def _kill_others(keep: int) -> bool:
    for _ in range(200):
        try:
            os.kill(keep, signal.SIGCONT)  # a stopped template could not reap the run
        except ProcessLookupError:
            return False
        try:
            pids = [p for p in other_pids() if p != keep]
        except OSError:  # pid 1 cannot list /proc (its fd limit was lowered from outside)
            return False
        if not pids:
            return True
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _reap_nohang()
        time.sleep(0.0005)  # zombies of the template's child go when it reaps them
    return False


def _empty_dir(path: str, budget_end: float) -> bool:
    """Remove everything under ``path`` without recursion; True when it is empty afterwards.

    Directories the program made unreadable are opened up again (all files belong to the
    sandbox's one uid); a directory deeper than ``_WIPE_DEPTH`` is moved up to ``path`` and
    removed from there, so neither the stack nor the open fds grow with the nesting depth.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        top = os.open(path, flags)
    except OSError:
        return False
    try:
        os.fchmod(top, 0o1777)
    except OSError:
        pass  # a root-owned mount point (Docker): the program could not change it either
    stack: list[tuple[int, str]] = [(top, "")]
    try:
        while stack:
            if time.monotonic() > budget_end:
                return False
            fd = stack[-1][0]
            child = _clear_entries(fd)
            if child is None:
                if len(stack) == 1:
                    break
                _, name = stack.pop()
                os.close(fd)
                os.rmdir(name, dir_fd=stack[-1][0])
                continue
            if len(stack) >= _WIPE_DEPTH:
                os.rename(child, f".wipe-{os.urandom(8).hex()}", src_dir_fd=fd, dst_dir_fd=top)
                continue
            os.chmod(child, 0o700, dir_fd=fd)
            stack.append((os.open(child, flags, dir_fd=fd), child))
        return not os.listdir(top)
    except OSError:
        return False
    finally:
        for fd, _ in stack:
            os.close(fd)


def _clear_entries(fd: int) -> str | None:
    """Unlink the files and empty directories of ``fd``; return a non-empty directory's name."""
    with os.scandir(fd) as entries:
        names = [e.name for e in entries]
    for name in names:
        try:
            os.unlink(name, dir_fd=fd)
            continue
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            pass
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError:
            return name
    return None


def _sysv_ids(kind: str) -> list[int]:
    with open(f"/proc/sysvipc/{kind}") as f:
        return [int(line.split()[1]) for line in f.readlines()[1:] if line.strip()]


def _purge_ipc() -> list[str]:
    """Remove every SysV IPC object and POSIX message queue; what could not be removed.

    Each table is listed once; only one that held something is removed from and listed again
    (an empty listing is itself the check), so an honest run costs four reads.
    """
    left: list[str] = []
    for kind in _SYSVIPC:
        ids = _sysv_ids(kind)
        if not ids:
            continue
        for ident in ids:
            if kind == "sem":
                _IPC_LIBC.semctl(ident, 0, _IPC_RMID)
            else:
                getattr(_IPC_LIBC, f"{kind}ctl")(ident, _IPC_RMID, None)
        still = _sysv_ids(kind)
        if still:
            left.append(f"{len(still)} SysV {kind} object(s)")
    try:
        queues = os.listdir(_MQUEUE)
    except OSError:
        return [*left, f"{_MQUEUE} is not mounted: message queues cannot be checked"]
    if not queues:
        return left
    for name in queues:
        try:
            os.unlink(f"{_MQUEUE}/{name}")
        except OSError:
            pass
    if os.listdir(_MQUEUE):
        left.append("POSIX message queues")
    return left


def run_delay(skip: int | None) -> float:
    """Seconds the live processes but pid 1 and ``skip`` waited runnable for a CPU."""
    total = 0
    try:
        pids = [p for p in other_pids() if p != skip]
    except OSError:
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def self_state() -> tuple[object, ...]:
    """pid 1's per-process attributes: what a syscall taking a *pid* could change from a run.

    rlimits (prlimit64), niceness (setpriority), scheduler policy and parameters
    (sched_setscheduler/setparam/setattr), CPU affinity (sched_setaffinity), I/O priority
    (ioprio_set) and timer slack (/proc/PID/timerslack_ns). personality(2) and the OOM score
    cannot be set on another process (no pid argument; pid 1 is non-dumpable, so its /proc
    files belong to root).
    """
    limits = tuple(resource.getrlimit(r) for r in _RLIMITS)
    ioprio = None
    if _SYS_IOPRIO_GET is not None:
        ioprio = _IPC_LIBC.syscall(_SYS_IOPRIO_GET, _IOPRIO_WHO_PROCESS, 0)
    return (
        limits,
        os.getpriority(os.PRIO_PROCESS, 0),
        os.sched_getscheduler(0),
        os.sched_getparam(0).sched_priority,
        tuple(sorted(os.sched_getaffinity(0))),
        ioprio,
        _IPC_LIBC.prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0),
    )


def cleanup(baseline: tuple[object, ...], keep: int | None, ipc: bool = True) -> list[str]:
    """Return the sandbox to its start state; what is left that could not be (empty = clean).

    ``ipc=False`` where the kernel itself is discarded after one run (gVisor: a fresh Sentry
    per check, no ``/proc/sysvipc`` to enumerate): IPC objects then die with the sandbox.
    """
    left: list[str] = []
    try:
        left += _purge_ipc() if ipc else []
        budget_end = time.monotonic() + _WIPE_BUDGET_S
        left += [f"{p} not emptied" for p in _WIPE if not _empty_dir(p, budget_end)]
        if [p for p in other_pids() if p != keep]:
            left.append("processes survived")
        if self_state() != baseline:
            left.append("the worker's own limits, priorities or scheduling were changed")
    except (OSError, ValueError, MemoryError) as exc:
        left.append(f"cleanup failed: {exc}")
    return left
