"""Math checks' CPU time, one process each side, rounds interleaved: certd vs Math-Verify 0.9.0.

A load-robust companion of ``bench_math.py`` for a shared machine: CPU seconds
(``time.process_time``) move far less with other people's load than wall time, and the two
sides alternate (A, B, A, B, …) in fresh processes so a change of load hits both.

- **Peer**: ``math_verify.parse`` + ``verify`` as in ``bench_math.py`` (same extraction
  configs, the case's precision), after warming on other inputs.
- **Ours**: ``certd.domains.math.verify_math`` (extraction, parsing, the exact equivalence
  and the identity test of issue 15), after ``warm_up()`` as a pool worker does; no gRPC, no
  first-step embedding (``bench_math.py`` measures those).

First pass over Math-Verify's 272 public cases, ``ROUNDS`` rounds; medians and the ratio of
the medians are reported.

Run: ``.venv/bin/python bench/bench_math_cpu.py`` → ``bench/results/math_cpu.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from _common import write

ROUNDS = 3
ROOT = Path(__file__).resolve().parents[1]

_SIDE = r"""
import json, sys, time
sys.path.insert(0, {conformance!r})
from mathverify_cases import load_cases
cases = load_cases()
fr, bx = "\\frac{{%d}}{{%d}}", "$\\boxed{{%d/%d}}$"
warm = [(fr % (i, i + 1), bx % (i, i + 1)) for i in range(1, 41)]
if {side!r} == "math_verify":
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
    targets = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    def check(gold, pred, precision):
        return bool(verify(parse(gold, targets), parse(pred, targets), float_rounding=precision))
else:
    from certd.domains.math import MathTask, verify_math
    from certd.domains.math.warmup import warm_up
    warm_up()
    def check(gold, pred, precision):
        task = MathTask(gold=gold, precision_digits=max(1, precision))
        return verify_math(task, pred).status.name == "CORRECT"
for g, p in warm:
    check(g, p, 6)
cpu, wall = time.process_time(), time.perf_counter()
got = [check(c.gold, c.pred, c.precision) for c in cases]
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
agree = sum(g == c.expected for g, c in zip(got, cases)) / len(cases)
print(json.dumps({{"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "agreement": agree}}))
"""


def side(name: str) -> dict[str, Any]:
    code = _SIDE.format(conformance=str(ROOT / "tests" / "conformance"), side=name)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=1800
    )
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    rounds = []
    for _ in range(ROUNDS):
        load = [round(x, 2) for x in os.getloadavg()]
        rounds.append(
            {"load_average": load, "math_verify": side("math_verify"), "certd": side("certd")}
        )
    med = {s: statistics.median(r[s]["cpu_s"] for r in rounds) for s in ("math_verify", "certd")}
    write(
        "math_cpu",
        {
            "rounds": ROUNDS,
            "per_round": rounds,
            "median_first_pass_cpu_s": med,
            "cpu_ratio_math_verify_over_certd": round(med["math_verify"] / med["certd"], 2),
            "note": "one process each side, no gRPC, no first-step embedding; shared machine",
        },
    )


if __name__ == "__main__":
    main()
