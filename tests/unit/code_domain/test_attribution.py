"""A sandbox that dies under a program twice is the program's verdict, never INFRA_ERROR.

The pool here is a stand-in that returns scripted results: a sandbox dying in the middle of a
run cannot be provoked on demand on these machines (the zygote now survives every attack the
security tests try), so the code checker's rule is tested on its own.
"""

from __future__ import annotations

from collections.abc import Iterator

from certd.authority.code_checker import CodeChecker
from certd.config import CodeConfig
from certd.domains import code as cc
from certd.domains.verdict import Status
from sandboxes import ExecResult, ExecStatus, Limits, Program

TASK = cc.CodeTask.io_cases("python", [cc.IoCase("1\n", "1\n")])
ANSWER = "```python\nprint(input())\n```"


def ok() -> ExecResult:
    return ExecResult(ExecStatus.OK, 0, None, b"1\n", b"", False, False, 0.01, 0.01, 1 << 20)


def died() -> ExecResult:
    return ExecResult.sandbox_error("worker failed: container exited", during_run=True)


class ScriptedPool:
    """Hands out the scripted results in order (stands in for a WarmPool)."""

    def __init__(self, results: list[ExecResult]) -> None:
        self.results: Iterator[ExecResult] = iter(results)
        self.runs = 0

    def run(self, program: Program, limits: Limits | None = None) -> ExecResult:
        self.runs += 1
        return next(self.results)


def check(results: list[ExecResult]) -> tuple[Status, str, int]:
    pool = ScriptedPool(results)
    checker = CodeChecker(CodeConfig(), pool=pool)  # type: ignore[arg-type]  # stand-in pool
    try:
        v = checker.verify(TASK, ANSWER)
    finally:
        checker.close()
    return v.status, v.detail, pool.runs


def test_one_death_runs_the_program_again() -> None:
    status, _, runs = check([died(), ok()])
    assert status is Status.CORRECT and runs == 2


def test_two_deaths_are_a_runtime_error() -> None:
    status, detail, runs = check([died(), died()])
    assert status is Status.RUNTIME_ERROR and runs == 2
    assert "died twice" in detail


def test_a_sandbox_that_never_started_is_infra_error() -> None:
    status, _, runs = check([ExecResult.sandbox_error("cannot start the worker container")])
    assert status is Status.INFRA_ERROR and runs == 1
