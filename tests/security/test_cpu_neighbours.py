"""A neighbour worker cannot flip an honest run to TIME_LIMIT by starving it of CPU (bwrap).

Issue 29: 30 busy children that each call ``setsid()`` (one scheduler autogroup each) cut the
other worker's CPU from ~1.2 to 0.23 CPU-s per 4 s, and an honest program needing 1.5 CPU-s went
CORRECT -> TIME_LIMIT. Each worker now has a CPU controller of its own (one budget for all its
processes however many sessions they make), and a wall limit reached while the run waited for a
CPU it never got is the host's fault (SANDBOX_ERROR, retried), never the program's TIME_LIMIT.
The test uses 60 such children, and scales the honest program's need down to what the shared
test machine gives one worker when it is busy.
"""

from __future__ import annotations

import threading
import time

import pytest

from sandboxes import BwrapSandbox, ExecResult, ExecStatus, Limits, Program

# Run alone, after the parallel suite (make unit): it measures what CPU neighbours do to a check.
pytestmark = pytest.mark.serial

LIMITS = Limits(
    cpu_time_s=3.0,
    wall_time_s=10.0,
    memory_bytes=128 * 2**20,
    processes=70,
    output_bytes=4096,
    file_size_bytes=64 * 1024,
    open_files=64,
    workdir_bytes=8 * 2**20,
)

NEIGHBOUR = """
import os, time
for _ in range(60):
    if os.fork() == 0:
        os.setsid()
        end = time.monotonic() + 12
        while time.monotonic() < end:
            pass
        os._exit(0)
time.sleep(12)
"""

HONEST = """
import time
while time.process_time() < NEED:
    pass
print('done', round(time.process_time(), 2))
"""

# What this (shared, often overloaded) machine gives one worker: CPU seconds in 2 s of spinning.
CALIBRATE = """
import time
end = time.monotonic() + 2
while time.monotonic() < end:
    pass
print(time.process_time() / 2)
"""


def py(code: str) -> Program:
    return Program(argv=("python3", "main.py"), files={"main.py": code.encode()})


@pytest.mark.slow
def test_thirty_setsid_children_cannot_starve_another_worker() -> None:
    box = BwrapSandbox(LIMITS)
    if box.cgroups.version is None or not box.cgroups.cpu:
        raise AssertionError(f"no CPU controller here: {box.cgroups.reason}")
    neighbour, honest = box.start_worker(), box.start_worker()
    try:
        alone = honest.run(py(CALIBRATE), LIMITS)  # the host's CPU rate without the neighbour
        rate_alone = float(alone.stdout)
        # ~1.5 CPU-s, or what 35% of the host's rate gives in the wall time on a busy machine: a
        # fair share beside one neighbour worker is 50%; 60 autogroups left it ~10% on old main.
        need = min(1.5, 0.35 * rate_alone * LIMITS.wall_time_s)
        got: list[ExecResult] = []
        attack = threading.Thread(target=lambda: got.append(neighbour.run(py(NEIGHBOUR), LIMITS)))
        attack.start()
        time.sleep(0.5)  # the neighbour's children are all running
        r = honest.run(py(HONEST.replace("NEED", f"{need:.3f}")), LIMITS)
        attack.join()
    finally:
        neighbour.kill()
        honest.kill()
        box.close()
    assert r.status is not ExecStatus.TIME_LIMIT, (r.detail, r.cpu_time_s, r.wall_time_s)
    # OK, unless the host itself (not the neighbour) starved it: then it says so, to be retried.
    assert r.ok or "host overloaded" in r.detail, (r.status, r.detail, need, rate_alone)
    # The neighbour hit its own wall: TIME_LIMIT, or host overload where its own cgroup got
    # less than half its CPU (on this shared test machine the host is busy; never OK).
    assert got and got[0].status in (ExecStatus.TIME_LIMIT, ExecStatus.SANDBOX_ERROR), got
    print(f"alone: {rate_alone:.2f} CPU-s/s; need {need:.2f} CPU-s")
    print("honest:", r.status.value, r.detail, f"{r.cpu_time_s:.2f} CPU-s {r.wall_time_s:.2f} s")
    print("neighbour:", got[0].status.value, got[0].detail)
