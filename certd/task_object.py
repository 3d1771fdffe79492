"""The one task object ``{"domain": …, "task": {…}}``: JSON in, a wire ``Task`` out.

Every place that accepts a task (forkgate's CLI flags and JSONL, the TRL/verl columns, the
Python API, certd's ``acceptance`` and ``learned_kappa`` config) reads it through this module,
so one object means one thing everywhere (docs/formats.md §0). Pure: no I/O, only the stubs.

Example:
    >>> t = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
    >>> parse_task_object(t).countdown.target
    83
    >>> parse_task_object({"task": {"gold": "1/2"}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: domain: required ("countdown", "math" or "code"); a task is ...
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from certd.v1 import tasks_pb2

__all__ = ["DOMAINS", "make_task", "parse_task_object"]

DOMAINS = ("countdown", "math", "code")

_NO_DOMAIN = (
    'domain: required ("countdown", "math" or "code"); a task is {"domain": …, "task": {…}}'
)


_KEYS = {
    "countdown": {"numbers", "target", "rules"},
    "math": {"gold", "precision_digits", "question", "task_identity"},
    "code": {"language", "prompt", "test", "entry_point", "cases", "compare"},
}
"""The fields of each domain's object (``task_identity`` is what ``task_json`` writes for a
math task with a question). Any other field is refused, never dropped: one rule for every
format that carries a task (docs/formats.md §0)."""


def _only(obj: Mapping[str, Any], allowed: set[str], where: str) -> None:
    """Refuse a field the object does not define (one line naming it)."""
    extra = sorted(str(k) for k in obj if k not in allowed)
    if extra:
        raise ValueError(f"{where}: unknown field(s) {extra}; expected only {sorted(allowed)}")


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
        _only(case, {"stdin", "stdout"}, f"task.cases[{i}]")
        pb_cases.append(tasks_pb2.CodeCase(stdin=_str(case, "stdin"), stdout=_str(case, "stdout")))
    return tasks_pb2.CodeTask(
        language=_str(obj, "language") or "python",
        prompt=_str(obj, "prompt"),
        test=_str(obj, "test"),
        entry_point=_str(obj, "entry_point"),
        cases=pb_cases,
        compare=_str(obj, "compare"),
    )


def _countdown_task(obj: Mapping[str, Any]) -> tasks_pb2.CountdownTask:
    numbers = obj.get("numbers")
    if not isinstance(numbers, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) for n in numbers
    ):
        raise ValueError(f"task.numbers: expected a list of integers, got {numbers!r}")
    rules = obj.get("rules") or {}
    if not isinstance(rules, Mapping):
        raise ValueError(f"task.rules: expected an object, got {rules!r}")
    _only(rules, {"at_most_once", "exactly_once"}, "task.rules")
    at_most_once = bool(rules.get("at_most_once", not rules.get("exactly_once", True)))
    return tasks_pb2.CountdownTask(
        numbers=numbers,
        target=_int(obj, "target"),
        rules=tasks_pb2.CountdownRules(at_most_once=at_most_once),
    )


def _math_task(obj: Mapping[str, Any]) -> tasks_pb2.MathTask:
    gold = obj.get("gold")
    if not isinstance(gold, str):
        raise ValueError(f"task.gold: expected a string, got {gold!r}")
    precision = obj.get("precision_digits", 0)
    if isinstance(precision, bool) or not isinstance(precision, int) or precision < 0:
        raise ValueError(f"task.precision_digits: expected an integer >= 0, got {precision!r}")
    question = obj.get("question", "")
    if not isinstance(question, str):
        raise ValueError(f"task.question: expected a string, got {question!r}")
    return tasks_pb2.MathTask(gold=gold, precision_digits=precision, question=question)


def make_task(domain: str, obj: Mapping[str, Any]) -> tasks_pb2.Task:
    """Build a wire task from a domain name and the domain's own object (the ``"task"`` part).

    Shapes: Countdown ``{"numbers": [25, 5, 4, 3], "target": 83, "rules": {"at_most_once":
    false}}``; math ``{"gold": "\\\\frac{1}{2}", "precision_digits": 6, "question": "…"}``
    (only ``gold`` required); code, HumanEval layout ``{"language": "python", "prompt": ...,
    "test": ..., "entry_point": ...}`` or stdin/stdout cases ``{"language":
    "python"|"c"|"cpp", "cases": [{"stdin": ..., "stdout": ...}], "compare":
    "exact"|"whitespace"|"float:1e-6"}``.

    Raises:
        ValueError: the object does not have the domain's shape, or has a field the domain
            does not define (the message names the field).

    Returns:
        The task message.
    """
    if not isinstance(obj, Mapping):
        raise ValueError(f"task: expected an object, got {type(obj).__name__}")
    if domain in _KEYS:
        _only(obj, _KEYS[domain], "task")
    if domain == "countdown":
        return tasks_pb2.Task(countdown=_countdown_task(obj))
    if domain == "math":
        return tasks_pb2.Task(math=_math_task(obj))
    if domain == "code":
        return tasks_pb2.Task(code=_code_task(obj))
    raise ValueError(f"domain: expected countdown, math or code, got {domain!r}")


def _deprecated(form: str, stacklevel: int) -> None:
    warnings.warn(
        f'the {form} task form is deprecated; write {{"domain": …, "task": {{…}}}} '
        "(docs/formats.md §0)",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def parse_task_object(obj: Any, *, stacklevel: int = 2) -> tasks_pb2.Task:
    """The task of a task object.

    The form is ``{"domain": "countdown"|"math"|"code", "task": {…the domain's object…}}``.
    Two older forms that name their domain are read as aliases with a ``DeprecationWarning``:
    the flat ``{"domain": "math", "gold": …}`` and protobuf JSON ``{"math": {"gold": …}}``.
    An object that names no domain is an error, never Countdown by default.

    Args:
        obj: the decoded JSON object.
        stacklevel: where the deprecation warning points (2: the caller).

    Raises:
        ValueError: no domain, an unknown one, or not the domain's shape (one line naming the
            field).

    Returns:
        The task message.
    """
    if not isinstance(obj, Mapping):
        raise ValueError(f"task: expected an object, got {type(obj).__name__}")
    if "domain" not in obj:
        keys = [k for k in DOMAINS if k in obj]
        if len(keys) == 1 and len(obj) == 1 and isinstance(obj[keys[0]], Mapping):
            _deprecated(f'protobuf-JSON {{"{keys[0]}": {{…}}}}', stacklevel)
            return make_task(keys[0], obj[keys[0]])
        raise ValueError(_NO_DOMAIN)
    domain = obj["domain"]
    if not isinstance(domain, str):
        raise ValueError(f"domain: expected a string, got {domain!r}")
    if domain not in DOMAINS:
        raise ValueError(f"domain: expected countdown, math or code, got {domain!r}")
    if "task" in obj:
        extra = sorted(set(obj) - {"domain", "task"})
        if extra:
            raise ValueError(f"task object: unexpected keys {extra} beside domain and task")
        return make_task(domain, obj["task"])
    _deprecated(f'flat {{"domain": "{domain}", …}}', stacklevel)
    return make_task(domain, {k: v for k, v in obj.items() if k != "domain"})
