"""A code batch prepares and judges its checks on ``batch_threads`` threads (2 x pool_size).

The pool is a stand-in that records how many checks are handed to it at once: the real
``WarmPool`` then queues them and runs at most ``pool_size`` in sandboxes (its own tests), so
the extra threads only parse, build and judge while the others' checks run.
"""

from __future__ import annotations

import threading
from typing import Any

from certd.authority.code_checker import CodeChecker
from certd.config import CodeConfig
from certd.domains import code as cc
from certd.domains.verdict import Status
from sandboxes import ExecResult, ExecStatus, Limits, Program

TASK = cc.CodeTask.io_cases("python", [cc.IoCase("1\n", "1\n")])
ANSWER = "```python\nprint(input())\n```"


class CountingPool:
    """Answers every run OK after a short hold; records the most runs handed over at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.threads: set[int] = set()

    def run(self, program: Program, limits: Limits | None = None, **_: Any) -> ExecResult:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.threads.add(threading.get_ident())
        threading.Event().wait(0.05)
        with self.lock:
            self.now -= 1
        return ExecResult(ExecStatus.OK, 0, None, b"1\n", b"", False, False, 0.01, 0.01, 1 << 20)


def batch(cfg: CodeConfig) -> CountingPool:
    pool = CountingPool()
    checker = CodeChecker(cfg, pool=pool)  # type: ignore[arg-type]  # stand-in pool
    try:
        verdicts = checker.verify_batch([(TASK, ANSWER)] * 12)
    finally:
        checker.close()
    assert [v.status for v in verdicts] == [Status.CORRECT] * 12
    return pool


def test_a_batch_hands_twice_the_pool_to_it_at_once_by_default() -> None:
    pool = batch(CodeConfig(pool_size=2))
    assert pool.most == 4 and len(pool.threads) == 4


def test_batch_threads_sets_how_many() -> None:
    pool = batch(CodeConfig(pool_size=2, batch_threads=2))
    assert pool.most == 2 and len(pool.threads) == 2
