"""Rollouts per second through ``Ratchet.admit`` as stratified groups (the training-loop cost).

16 Countdown tasks × 64 responses verified (two VerifyBatch calls of at most 1,000, so two
receipts; the ratchet fetches one consistency proof to move its checkpoint), grouped by
(task, family) with ``forkgate.groups``; the ratchet then checks every group offline: the
receipt's signature and inclusion proof (once per group), each verdict's path to the signed
root, and each verdict digest recomputed from the task, the response and the verdict.
Admission of the same groups again is timed as well. No peer does this check; the figure is
the cost the ratchet adds per training batch (most of it protobuf JSON parsing).

Run: ``.venv/bin/python bench/bench_ratchet_groups.py`` → ``bench/results/ratchet_groups.json``.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import median, write

from forkgate import CertdClient
from forkgate.groups import group_records
from forkgate.local import LocalCertd
from forkgate.puzzles import countdown_puzzles
from forkgate.ratchet import Ratchet

TASKS, PER_TASK, REPEATS = 16, 64, 5


def responses(task: dict[str, Any], rng: random.Random) -> list[str]:
    numbers = [int(x) for x in task["numbers"]]
    out = []
    for _ in range(PER_TASK):
        rng.shuffle(numbers)
        ops = [rng.choice("+-*") for _ in numbers[1:]]
        expr = str(numbers[0]) + "".join(f"{o}{n}" for o, n in zip(ops, numbers[1:], strict=True))
        out.append(f"<answer>{expr}</answer>")
    return out


def main() -> None:
    rng = random.Random(5)
    tasks = countdown_puzzles(TASKS, seed=5)
    with tempfile.TemporaryDirectory() as tmp:
        with LocalCertd(Path(tmp) / "d") as certd:
            with CertdClient(certd.address) as client:
                items = [(t, r) for t in tasks for r in responses(t, rng)]
                pairs = client.verify_batch_receipted(items)
                records = []
                for k, t in enumerate(tasks):
                    chunk = range(k * PER_TASK, (k + 1) * PER_TASK)
                    records += group_records(t, [(items[i][1], *pairs[i]) for i in chunk])
                first, again = [], []
                for _ in range(REPEATS):
                    ratchet = Ratchet(
                        [certd.vkey],
                        kappas={"countdown.first-op.v1"},
                        consistency=lambda a, b: client.consistency_proof(a, b).hashes,
                    )
                    t0 = time.perf_counter()
                    assert all(ratchet.admit(g).admitted for g in records)
                    first.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    assert all(ratchet.admit(g).admitted for g in records)
                    again.append(time.perf_counter() - t0)
    n = len(items)
    write(
        "ratchet_groups",
        {
            "rollouts": n,
            "groups": len(records),
            "repeats": REPEATS,
            "median_seconds": round(median(first), 4),
            "median_rollouts_per_second": round(n / median(first), 1),
            "median_rollouts_per_second_readmitted": round(n / median(again), 1),
        },
    )


if __name__ == "__main__":
    main()
