"""The verification worker pool: same verdicts as in process, survives a dead worker."""

from __future__ import annotations

import os
import signal
import time

from certd.authority.checker import Checkers
from certd.authority.verify_items import CheckItem, check_items
from certd.authority.verifypool import VerifyPool
from certd.config import CertdConfig
from certd.domains import countdown as cd
from certd.domains.verdict import Status
from forkgate.puzzles import countdown_puzzles


def _items(n: int) -> list[CheckItem]:
    out = []
    for i, p in enumerate(countdown_puzzles(n // 4, seed=9)):
        task = cd.CountdownTask(numbers=tuple(p["numbers"]), target=int(p["target"]))
        nums = p["numbers"]
        for j, text in enumerate(
            ["+".join(map(str, nums)), f"{nums[0]}**2", "nothing", "*".join(map(str, nums))]
        ):
            out.append(
                CheckItem(f"{i}-{j}", task, "ab" * 32, f"<answer>{text}</answer>", "countdown")
            )
    return out


def test_pool_matches_in_process_and_recovers_from_a_killed_worker() -> None:
    checker = Checkers(CertdConfig()).for_domain("countdown")
    items = _items(400)
    want = check_items(checker, items)
    pool = VerifyPool(checker, workers=2, min_batch=64)
    try:
        got = pool.check(items)
        assert [(r.verdict, r.digest) for r in got] == [(r.verdict, r.digest) for r in want]
        victim = pool.worker_pids()[0]
        os.kill(victim, signal.SIGKILL)
        time.sleep(0.5)
        again = pool.check(items)  # the broken pool is rebuilt, the batch retried
        assert [r.digest for r in again] == [r.digest for r in want]
        assert victim not in pool.worker_pids()
        assert len(pool.worker_pids()) == 2
    finally:
        pool.close()
    assert {r.verdict.status for r in want} >= {Status.WRONG_ANSWER, Status.RULE_VIOLATION}
