"""``python bench/_profiled_certd.py OUT.pstats certd-args...``: ``certd`` with a CPU profile
(``time.thread_time``) of every thread, merged into OUT at exit (for the benches' --profile)."""

from __future__ import annotations

import atexit
import cProfile
import pstats
import runpy
import sys
import threading
import time
from typing import Any

_PROFILES: list[cProfile.Profile] = []


def _start(*_: Any) -> None:
    sys.setprofile(None)
    p = cProfile.Profile(time.thread_time)
    _PROFILES.append(p)
    p.enable()


def _dump(path: str) -> None:
    stats: pstats.Stats | None = None
    for p in list(_PROFILES):
        p.disable()
        try:
            stats = pstats.Stats(p) if stats is None else stats.add(p)
        except TypeError:  # a profile with no data
            continue
    if stats is not None:
        stats.dump_stats(path)


if __name__ == "__main__":
    out = sys.argv[1]
    sys.argv = ["certd", *sys.argv[2:]]
    threading.setprofile(_start)
    _start()
    atexit.register(_dump, out)
    runpy.run_module("certd.cli", run_name="__main__")
