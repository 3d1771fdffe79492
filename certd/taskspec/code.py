"""The code domain's wire half: HumanEval layout or stdin/stdout cases (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from certd.taskspec import TaskSpec
from certd.taskspec._fields import only_fields, str_field
from certd.v1 import tasks_pb2

__all__ = ["SPEC"]

_CASE_FIELDS = frozenset({"stdin", "stdout"})


def from_object(obj: Mapping[str, Any]) -> tasks_pb2.CodeTask:
    """The message of a code task object (``language`` defaults to python)."""
    cases = obj.get("cases", [])
    if not isinstance(cases, list):
        raise ValueError(f"task.cases: expected a list of objects, got {cases!r}")
    pb_cases = []
    for i, case in enumerate(cases):
        if not isinstance(case, Mapping):
            raise ValueError(f"task.cases[{i}]: expected an object, got {case!r}")
        only_fields(case, _CASE_FIELDS, f"task.cases[{i}]")
        pb_cases.append(
            tasks_pb2.CodeCase(stdin=str_field(case, "stdin"), stdout=str_field(case, "stdout"))
        )
    return tasks_pb2.CodeTask(
        language=str_field(obj, "language") or "python",
        prompt=str_field(obj, "prompt"),
        test=str_field(obj, "test"),
        entry_point=str_field(obj, "entry_point"),
        cases=pb_cases,
        compare=str_field(obj, "compare"),
    )


def canonical(c: tasks_pb2.CodeTask, identity: int) -> dict[str, Any]:
    """The digest's object (the same under every identity version)."""
    return {
        "cases": [{"stdin": t.stdin, "stdout": t.stdout} for t in c.cases],
        "compare": c.compare or "exact",
        "domain": "code",
        "entry_point": c.entry_point,
        "language": c.language,
        "prompt": c.prompt,
        "test": c.test,
    }


SPEC = TaskSpec(
    name="code",
    from_object=from_object,
    canonical=canonical,
    fields=frozenset({"language", "prompt", "test", "entry_point", "cases", "compare"}),
    rank=3,
)
