"""Tasks from plain JSON objects, in the shapes the CLI and the JSONL files use.

Example:
    >>> t = make_task("countdown", {"numbers": [25, 5, 4, 3], "target": 83})
    >>> list(t.countdown.numbers), t.countdown.target
    ([25, 5, 4, 3], 83)
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from certd.v1 import tasks_pb2

__all__ = ["TaskLike", "as_task", "make_task"]

TaskLike = tasks_pb2.Task | Mapping[str, Any]


def _int(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"task.{key}: expected an integer, got {value!r}")
    return value


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f"task.{key}: expected a string, got {value!r}")
    return value


def _code_task(obj: Mapping[str, Any]) -> tasks_pb2.CodeTask:
    cases = obj.get("cases", [])
    if not isinstance(cases, list):
        raise ValueError(f"task.cases: expected a list of objects, got {cases!r}")
    pb_cases = []
    for i, case in enumerate(cases):
        if not isinstance(case, Mapping):
            raise ValueError(f"task.cases[{i}]: expected an object, got {case!r}")
        pb_cases.append(tasks_pb2.CodeCase(stdin=_str(case, "stdin"), stdout=_str(case, "stdout")))
    return tasks_pb2.CodeTask(
        language=_str(obj, "language") or "python",
        prompt=_str(obj, "prompt"),
        test=_str(obj, "test"),
        entry_point=_str(obj, "entry_point"),
        cases=pb_cases,
        compare=_str(obj, "compare"),
    )


def make_task(domain: str, obj: Mapping[str, Any]) -> tasks_pb2.Task:
    """Build a wire task from a domain name and its JSON object.

    Shapes: Countdown ``{"numbers": [25, 5, 4, 3], "target": 83, "rules": {"at_most_once":
    false}}``; math ``{"gold": "\\\\frac{1}{2}", "precision_digits": 6, "question": "…"}``
    (only ``gold`` required); code, HumanEval layout ``{"language": "python", "prompt": ...,
    "test": ..., "entry_point": ...}`` or stdin/stdout cases ``{"language":
    "python"|"c"|"cpp", "cases": [{"stdin": ..., "stdout": ...}], "compare":
    "exact"|"whitespace"|"float:1e-6"}``.

    Raises:
        ValueError: the object does not have the domain's shape (the message names the field).

    Returns:
        The task message.
    """
    if not isinstance(obj, Mapping):
        raise ValueError(f"task: expected an object, got {type(obj).__name__}")
    if domain == "countdown":
        numbers = obj.get("numbers")
        if not isinstance(numbers, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in numbers
        ):
            raise ValueError(f"task.numbers: expected a list of integers, got {numbers!r}")
        rules = obj.get("rules") or {}
        if not isinstance(rules, Mapping):
            raise ValueError(f"task.rules: expected an object, got {rules!r}")
        at_most_once = bool(rules.get("at_most_once", not rules.get("exactly_once", True)))
        return tasks_pb2.Task(
            countdown=tasks_pb2.CountdownTask(
                numbers=numbers,
                target=_int(obj, "target"),
                rules=tasks_pb2.CountdownRules(at_most_once=at_most_once),
            )
        )
    if domain == "math":
        gold = obj.get("gold")
        if not isinstance(gold, str):
            raise ValueError(f"task.gold: expected a string, got {gold!r}")
        precision = obj.get("precision_digits", 0)
        if isinstance(precision, bool) or not isinstance(precision, int) or precision < 0:
            raise ValueError(f"task.precision_digits: expected an integer >= 0, got {precision!r}")
        question = obj.get("question", "")
        if not isinstance(question, str):
            raise ValueError(f"task.question: expected a string, got {question!r}")
        return tasks_pb2.Task(
            math=tasks_pb2.MathTask(gold=gold, precision_digits=precision, question=question)
        )
    if domain == "code":
        return tasks_pb2.Task(code=_code_task(obj))
    raise ValueError(f"domain: expected countdown, math or code, got {domain!r}")


def as_task(task: TaskLike) -> tasks_pb2.Task:
    """Accept a task message, or a JSON object with a ``domain`` key.

    Forms: ``{"domain": "math", "task": {"gold": "1/2"}}`` (the JSONL contract) or the flat
    ``{"domain": "math", "gold": "1/2"}`` (TRL/verl columns). An object without ``domain`` is
    an error, except the Countdown shape ``{"numbers", "target"}``, still read as Countdown
    with a ``DeprecationWarning``.

    Example:
        >>> as_task({"domain": "math", "task": {"gold": "1/2"}}).math.gold
        '1/2'
        >>> as_task({"gold": "1/2"})
        Traceback (most recent call last):
        ValueError: domain: required ("countdown", "math" or "code"); got a task without one

    Raises:
        ValueError: the object is malformed or has no domain.
    """
    if isinstance(task, tasks_pb2.Task):
        return task
    if not isinstance(task, Mapping):
        raise ValueError(f"task: expected an object, got {type(task).__name__}")
    domain = task.get("domain")
    if domain is None:
        if "numbers" not in task or "target" not in task:
            raise ValueError(
                'domain: required ("countdown", "math" or "code"); got a task without one'
            )
        warnings.warn(
            'a task without "domain" is read as Countdown; add "domain": "countdown"',
            DeprecationWarning,
            stacklevel=2,
        )
        domain = "countdown"
    if not isinstance(domain, str):
        raise ValueError(f"domain: expected a string, got {domain!r}")
    if set(task) == {"domain", "task"}:
        return make_task(domain, task["task"])
    return make_task(domain, {k: v for k, v in task.items() if k != "domain"})
