"""Opt-in CPU accounting per test module: ``FORKGATE_CPU_REPORT=dir pytest …``.

Each pytest process (each xdist worker) writes ``dir/cpu-<pid>.json``: for every test module,
the CPU seconds (user + system) spent by that process and by the children it reaped while the
module's tests ran (servers, sandboxes and subprocesses started and waited for by the tests).
Docker containers run under the engine, not the test, and are not counted. Merge the files
with ``scripts/module_cpu.py dir``.
"""

from __future__ import annotations

import json
import os
import resource
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

_REPORT = os.environ.get("FORKGATE_CPU_REPORT")
_cpu: dict[str, float] = defaultdict(float)
_wall: dict[str, float] = defaultdict(float)


def _cpu_now() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    import time

    module = item.nodeid.split("::", 1)[0]
    c0, w0 = _cpu_now(), time.monotonic()
    yield
    _cpu[module] += _cpu_now() - c0
    _wall[module] += time.monotonic() - w0


def pytest_sessionfinish() -> None:
    if not _REPORT or not _cpu:
        return
    out = Path(_REPORT)
    out.mkdir(parents=True, exist_ok=True)
    table = {m: {"cpu_s": round(_cpu[m], 2), "wall_s": round(_wall[m], 2)} for m in _cpu}
    (out / f"cpu-{os.getpid()}.json").write_text(json.dumps(table, indent=1) + "\n")
