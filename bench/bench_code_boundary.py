"""The function-test boundary's cost: HumanEval through one sandbox pool, two harnesses, A/B.

Run: ``.venv/bin/python bench/bench_code_boundary.py`` → ``bench/results/code_boundary.json``.

The same warm bwrap pool (2 workers, 2 threads) runs HumanEval's 164 canonical solutions under
the boundary (``judge.function_program``: tests and solution in two processes, values through
the codec) and under the earlier one-interpreter harness (kept below as the reference), in
alternating rounds so that the load of a shared machine falls on both alike. Reported: the
rate of each per round, the median of the ratios, and the load average around the run.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _code import human_eval_problems
from _common import write

from certd.domains.code import CodeTask, function_program, judge_function
from certd.domains.verdict import Status
from sandboxes import BwrapSandbox, Limits, Program, WarmPool

ROUNDS = 3
LIMITS = Limits(cpu_time_s=3.0, wall_time_s=20.0, memory_bytes=512 << 20, processes=16)
# The harness before issue #36: solution and tests in one namespace (forgeable; reference only).
ONE_INTERPRETER = """\
import os as _fg_os
def _fg_run():
    with open("solution.py", encoding="utf-8") as f:
        solution = f.read()
    with open("tests.py", encoding="utf-8") as f:
        tests = f.read()
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(solution, "solution.py", "exec"), namespace)
    exec(compile(tests, "tests.py", "exec"), namespace)
    namespace["check"](namespace[ENTRY])
    _fg_os.write(3, _fg_os.read(4, 256))
_fg_run()
"""


def one_interpreter(task: CodeTask, code: str) -> Program:
    files = {
        "main.py": ONE_INTERPRETER.replace("ENTRY", repr(task.entry_point)).encode(),
        "solution.py": (task.prompt + code).encode(),
        "tests.py": task.test.encode(),
    }
    return Program(("python3", "main.py"), files, inline_python=True, completion_channel=True)


def rate(pool: WarmPool, pairs: list[tuple[CodeTask, str]], make: Any) -> tuple[float, int]:
    def one(pair: tuple[CodeTask, str]) -> bool:
        task, code = pair
        return judge_function(task, pool.run(make(task, code), LIMITS)).status is Status.CORRECT

    t0 = time.perf_counter()
    with ThreadPoolExecutor(2) as ex:
        ok = sum(ex.map(one, pairs))
    return len(pairs) / (time.perf_counter() - t0), ok


def main() -> None:
    probs = human_eval_problems()
    pairs = [
        (
            CodeTask.function_tests(
                prompt=p["prompt"], test=p["test"], entry_point=p["entry_point"]
            ),
            p["canonical_solution"],
        )
        for p in probs
    ]
    load_before = os.getloadavg()
    pool = WarmPool(BwrapSandbox(LIMITS), size=2)
    rounds = []
    try:
        rate(pool, pairs[:8], function_program)  # warm the pool
        for _ in range(ROUNDS):
            b, b_ok = rate(pool, pairs, function_program)
            o, o_ok = rate(pool, pairs, one_interpreter)
            rounds.append(
                {
                    "boundary_checks_per_s": round(b, 2),
                    "boundary_correct": b_ok,
                    "one_interpreter_checks_per_s": round(o, 2),
                    "one_interpreter_correct": o_ok,
                    "ratio": round(b / o, 3),
                }
            )
    finally:
        pool.close()
        pool.backend.close()
    write(
        "code_boundary",
        {
            "note": "2-core machine shared with other work while this ran",
            "load_average_1_5_15_before_after": [
                [round(x, 2) for x in load_before],
                [round(x, 2) for x in os.getloadavg()],
            ],
            "checks": len(pairs),
            "rounds": rounds,
            "median_boundary_over_one_interpreter": statistics.median(r["ratio"] for r in rounds),
        },
    )


if __name__ == "__main__":
    main()
