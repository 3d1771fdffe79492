"""The cost of one check on each sandbox backend: bwrap, Docker and gVisor (strict mode).

Run: ``.venv/bin/python bench/bench_sandbox_cost.py [--checks 20]`` →
``bench/results/sandbox_cost.json``.

Two figures per backend, each the median over ``--checks`` sequential checks of
``python3 -c "print(1)"`` with the limits of a default certd:

* **pool check**: ``WarmPool(size=1).run`` one after another, as certd runs checks. bwrap and
  Docker reuse the warm worker (a fork of its zygote per check); gVisor starts a fresh sandbox
  for every check, so each check waits for the replacement that the previous one caused.
* **cold sandbox**: ``Sandbox.run``: start a sandbox, run once, kill it.

With ``--human-eval``, also HumanEval's 164 canonical solutions through the code checker
(``verify_batch``, a pool of 2 as in ``bench_code.py``): how many are CORRECT, and checks/s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _code import human_eval_problems
from _common import median, write

from certd.authority.code_checker import CodeChecker, make_backend
from certd.config import CodeConfig
from certd.domains.code.task import CodeTask
from certd.domains.verdict import Status
from sandboxes import Program, WarmPool

PROGRAM = Program(argv=("python3", "-c", "print(1)"))


def one_backend(name: str, checks: int) -> dict[str, float]:
    """Median seconds of a pool check and of a cold sandbox on backend ``name``."""
    box = make_backend(CodeConfig(backend=name))
    try:
        with WarmPool(box, size=1) as pool:
            pool.wait_ready(120)
            pool.run(PROGRAM)  # warm caches
            pooled = []
            for _ in range(checks):
                start = time.monotonic()
                assert pool.run(PROGRAM).ok
                pooled.append(time.monotonic() - start)
        cold = []
        for _ in range(checks):
            start = time.monotonic()
            assert box.run(PROGRAM).ok
            cold.append(time.monotonic() - start)
    finally:
        box.close()
    return {"pool_check_median_s": median(pooled), "cold_sandbox_median_s": median(cold)}


def human_eval(name: str) -> dict[str, float]:
    """The 164 canonical HumanEval solutions on backend ``name``: CORRECT count and rate."""
    problems = human_eval_problems()
    pairs = [
        (
            CodeTask(
                language="python", prompt=p["prompt"], test=p["test"], entry_point=p["entry_point"]
            ),
            p["canonical_solution"],
        )
        for p in problems
    ]
    checker = CodeChecker(CodeConfig(backend=name, pool_size=2))
    try:
        checker.pool().wait_ready(120)
        start = time.monotonic()
        verdicts = checker.verify_batch(pairs)
        seconds = time.monotonic() - start
    finally:
        checker.close()
    correct = sum(v.status is Status.CORRECT for v in verdicts)
    return {"human_eval_correct": correct, "human_eval_checks_per_s": len(pairs) / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=20)
    parser.add_argument("--backends", default="bwrap,docker,gvisor")
    parser.add_argument("--human-eval", action="store_true")
    args = parser.parse_args()
    results = {b: one_backend(b, args.checks) for b in args.backends.split(",") if b}
    if args.human_eval:
        for b, figures in results.items():
            figures.update(human_eval(b))
    write("sandbox_cost", {"checks": args.checks, "backends": results})


if __name__ == "__main__":
    main()
