"""Worker processes that end when the certd process that owns them ends, however it ends.

Example (in a worker, first thing)::

    die_with(owner_pid)   # owner_pid = os.getpid() of certd, passed to the worker

Pool workers are forked by multiprocessing's forkserver, not by certd itself, so neither
``PR_SET_PDEATHSIG`` (it fires on the death of the parent *thread*, and the parent is the
forkserver) nor the pool's pipes (a ``ProcessPoolExecutor`` worker holds both ends of its
call queue, so it never reads EOF) tell a worker that certd was killed with SIGKILL. Instead
each worker opens a pidfd of certd (``pidfd_open(2)``, Linux 5.3) and a daemon thread waits
for it to become readable, which the kernel does when certd exits, then ends the worker with
``os._exit``. A pidfd names one process, never a later one that reuses the pid.

The forkserver and multiprocessing's resource tracker need no watch: both exit when every
holder of their pipes (certd and the workers) has exited.
"""

from __future__ import annotations

import os
import select
import threading
import time

__all__ = ["OWNER_GONE_EXIT", "die_with"]

OWNER_GONE_EXIT = 71
"""Exit status of a worker whose owner process ended (EX_OSERR)."""

_POLL_S = 0.5


def die_with(owner_pid: int) -> None:
    """End this process as soon as process ``owner_pid`` ends (a daemon thread watches it).

    Args:
        owner_pid: the owning certd process, which must be alive when the worker started;
            if it is gone already, this process exits now.
    """
    try:
        fd: int | None = os.pidfd_open(owner_pid)
    except ProcessLookupError:
        os._exit(OWNER_GONE_EXIT)
    except OSError:  # no pidfd_open on this kernel: poll the pid instead
        fd = None
    threading.Thread(target=_watch, args=(owner_pid, fd), name="lifeline", daemon=True).start()


def _watch(owner_pid: int, fd: int | None) -> None:
    if fd is not None:
        select.select([fd], [], [])  # readable once the process has exited
    else:
        while _alive(owner_pid):
            time.sleep(_POLL_S)
    os._exit(OWNER_GONE_EXIT)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
