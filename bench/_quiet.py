"""Waiting for a quiet machine between benchmark phases, and saying how quiet it was.

Example::

    from _quiet import wait_quiet
    print(wait_quiet(max_wait_s=10.0))  # {'waited_s': ..., 'own_cpu': ..., 'host_busy': ...}

A phase measured right after another can pay for the first one's tail: a worker start, a
sandbox's teardown, the container engine removing a container. ``wait_quiet`` samples two
counters every ``step_s`` and returns once, over one step, this process's tree (itself and its
live descendants, with the children they reaped) and the container engine used less than
``own_below`` of a CPU, and the whole host (``/proc/stat``, every core) was busy less than
``host_below`` of its cores. Other people's work on a shared machine is not ours to wait out for
long: after ``max_wait_s`` it returns anyway, and the figures it returns say what the next
phase ran beside.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["host_busy", "own_cpu_s", "wait_quiet"]

_TICK = os.sysconf("SC_CLK_TCK")
_ENGINE = ("dockerd", "containerd")


def host_times() -> tuple[int, int]:
    """(busy, total) jiffies of every core since boot, from the first line of /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields)
    return total - idle, total


def host_busy(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of every core's time that was busy between two ``host_times`` samples."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def _procs() -> dict[int, tuple[int, str, float]]:
    """pid → (ppid, comm, CPU seconds of itself and its reaped children)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        cpu = sum(int(x) for x in fields[11:15]) / _TICK  # utime stime cutime cstime
        out[int(name)] = (int(fields[1]), comm, cpu)
    return out


def own_cpu_s(root: int | None = None, *, engine: bool = True) -> float:
    """CPU seconds of ``root``'s process tree (default this process) and, with ``engine``, the
    container engine's processes (dockerd, containerd, the shims; not the containers)."""
    procs = _procs()
    mine = {os.getpid() if root is None else root}
    grew = True
    while grew:
        kids = {pid for pid, (ppid, _, _) in procs.items() if ppid in mine and pid not in mine}
        mine |= kids
        grew = bool(kids)
    if engine:
        mine |= {p for p, (_, comm, _) in procs.items() if comm.startswith(_ENGINE)}
    return sum(procs[p][2] for p in mine if p in procs)


def wait_quiet(
    *,
    max_wait_s: float = 10.0,
    step_s: float = 0.5,
    own_below: float = 0.05,
    host_below: float = 0.25,
) -> dict[str, Any]:
    """Wait until our processes and the host are quiet (or ``max_wait_s`` passed).

    Args:
        max_wait_s: The longest wait.
        step_s: The sampling window.
        own_below: Most CPUs our tree and the engine may use over a window (0.05: 5% of one).
        host_below: Most share of all cores the host may keep busy over a window.

    Returns:
        ``waited_s``, the last window's ``own_cpus`` (CPUs used by our tree and the engine)
        and ``host_busy`` (share of every core), and ``quiet`` (both under their bounds).
    """
    t0 = time.monotonic()
    while True:
        own0, host0, w0 = own_cpu_s(), host_times(), time.monotonic()
        time.sleep(step_s)
        own1, host1, w1 = own_cpu_s(), host_times(), time.monotonic()
        own = max(0.0, own1 - own0) / (w1 - w0)
        busy = host_busy(host0, host1)
        quiet = own < own_below and busy < host_below
        if quiet or w1 - t0 >= max_wait_s:
            return {
                "waited_s": round(w1 - t0, 2),
                "own_cpus": round(own, 3),
                "host_busy": round(busy, 3),
                "quiet": quiet,
            }
