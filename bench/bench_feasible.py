"""What signing ``feasible`` costs a certificate: the Countdown enumeration per task, in CPU-s
per 1,000 certificates of ``bench_certify.py``'s requests (each task enumerated once, as the
authority caches it by task digest).

Three enumerators on the same tasks, interleaved round by round in one process (so they see
the same load): ``reference`` (the enumerator before the speed-up, kept verbatim in
``tests/unit/countdown/reference_enumeration.py``), ``enumerate_families`` (what
EnumerateFamilies serves) and ``count_families`` (what a Certify signs; no witnesses).

Run: ``.venv/bin/python bench/bench_feasible.py`` → ``bench/results/feasible.json``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from _common import certify_requests, write

from certd.domains import countdown as cd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "unit" / "countdown"))
import reference_enumeration as reference

ROUNDS = 3


def main() -> None:
    reqs = certify_requests(2500, seed=21)
    keys = dict.fromkeys((tuple(p["numbers"]), int(str(p["target"]))) for p, _, _ in reqs)
    tasks = [cd.CountdownTask(numbers=n, target=t) for n, t in keys]
    enumerators = {
        "reference": reference.enumerate_families,
        "enumerate_families": cd.enumerate_families,
        "count_families": cd.count_families,
    }
    cpu: dict[str, list[float]] = {name: [] for name in enumerators}
    load = [os.getloadavg()[0]]
    for _ in range(ROUNDS):
        for name, enumerate_task in enumerators.items():
            t0 = time.process_time()
            for task in tasks:
                enumerate_task(task)
            cpu[name].append(round((time.process_time() - t0) / len(reqs) * 1000, 3))
    load.append(os.getloadavg()[0])
    medians = {name: statistics.median(v) for name, v in cpu.items()}
    write(
        "feasible",
        {
            "certificates": len(reqs),
            "tasks": len(tasks),
            "cpu_s_per_1000_certificates": cpu,
            "median_cpu_s_per_1000_certificates": medians,
            "reference_over_count_families": round(
                medians["reference"] / medians["count_families"], 2
            ),
            "loadavg_1min_before_after": load,
        },
    )


if __name__ == "__main__":
    main()
