"""CPU and page faults of a code check's *runs* alone, per check, on one warm worker.

Run: ``.venv/bin/python bench/profile_code_runs.py [bwrap|docker] [--rounds N]`` (prints JSON).

One worker of the backend (``start_worker``, certd's default code limits) runs HumanEval's 164
canonical solutions through the function-test harness (``judge.function_program``), one after
another, ``--rounds`` times after a warm-up of 8. Per round and check, from the host's
``/proc/PID/stat`` of the worker's template (bwrap; Docker's template is read through the
container's pid namespace as well): the CPU of the runs it reaped (the test process and the
solution process it forks, with their exits), their minor page faults, and pid 1's and the
template's own CPU. No gRPC, no certd process: the figure an optimisation of the run itself
moves. To compare commits, run it with ``PYTHONPATH`` at the other commit's ``git archive``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _code import human_eval_problems
from profile_code_check import _children, _zygote_pid

from certd.authority.code_checker import _limits, make_backend
from certd.config import CodeConfig
from certd.domains.code import judge
from certd.domains.code.task import CodeTask

_TICK = os.sysconf("SC_CLK_TCK")


def _fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _sample(zygote: int) -> dict[str, float]:
    z = _fields(zygote)
    s = {"zygote_ms": (int(z[11]) + int(z[12])) / _TICK * 1e3, "template_ms": 0.0}
    s.update(runs_ms=0.0, runs_minflt=0.0)
    for tp in _children(zygote):
        f = _fields(tp)
        s["template_ms"] += (int(f[11]) + int(f[12])) / _TICK * 1e3
        s["runs_ms"] += (int(f[13]) + int(f[14])) / _TICK * 1e3
        s["runs_minflt"] += int(f[8])  # cminflt: the reaped runs' minor faults
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("backend", nargs="?", default="bwrap", choices=["bwrap", "docker"])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cfg = CodeConfig(backend=args.backend)
    limits = _limits(cfg)
    box = make_backend(cfg)  # as certd's: the templates preload the harness
    preloaded = judge.HARNESS_MODULE in box.preloads
    progs = []
    for p in human_eval_problems():
        task = CodeTask(
            language="python", prompt=p["prompt"], test=p["test"], entry_point=p["entry_point"]
        )
        progs.append(judge.function_program(task, p["canonical_solution"], preloaded=preloaded))
    worker = box.start_worker()
    out: dict[str, Any] = {"backend": args.backend, "load_before": os.getloadavg(), "rounds": []}
    try:
        for prog in progs[:8]:
            worker.run(prog, limits)
        zygote = _zygote_pid(worker)
        for _ in range(args.rounds):
            before, t0 = _sample(zygote), time.monotonic()
            ok = sum(worker.run(prog, limits).ok for prog in progs)
            after = _sample(zygote)
            n = len(progs)
            rnd = {k: round((after[k] - before[k]) / n, 3) for k in before}
            rnd.update(ok=ok, wall_s=round(time.monotonic() - t0, 2))
            out["rounds"].append(rnd)
    finally:
        worker.kill()
        box.close()
    out["load_after"] = os.getloadavg()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
