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

from certd.taskspec import domain_choices, domain_names, task_spec
from certd.taskspec._fields import only_fields
from certd.v1 import tasks_pb2

__all__ = ["make_task", "parse_task_object"]


def _no_domain() -> str:
    quote = '"'
    return f'domain: required ({domain_choices(quote)}); a task is {{"domain": …, "task": {{…}}}}'


def make_task(domain: str, obj: Mapping[str, Any]) -> tasks_pb2.Task:
    """Build a wire task from a domain name and the domain's own object (the ``"task"`` part).

    Shapes: Countdown ``{"numbers": [25, 5, 4, 3], "target": 83, "rules": {"at_most_once":
    false}}``; math ``{"gold": "\\\\frac{1}{2}", "precision_digits": 6, "question": "…"}``
    (only ``gold`` required); code, HumanEval layout ``{"language": "python", "prompt": ...,
    "test": ..., "entry_point": ...}`` or stdin/stdout cases ``{"language":
    "python"|"c"|"cpp", "cases": [{"stdin": ..., "stdout": ...}], "compare":
    "exact"|"whitespace"|"float:1e-6"}``. Each domain's shape is its ``certd.taskspec`` spec.

    Raises:
        ValueError: the object does not have the domain's shape, or has a field the domain
            does not define (the message names the field).

    Returns:
        The task message.
    """
    if not isinstance(obj, Mapping):
        raise ValueError(f"task: expected an object, got {type(obj).__name__}")
    spec = task_spec(domain)
    if spec is None:
        raise ValueError(f"domain: expected {domain_choices()}, got {domain!r}")
    if "domain" in obj:  # the flat form's marker, inside the object: it must name this domain
        if obj["domain"] != domain:
            raise ValueError(f"task.domain: {obj['domain']!r} inside a {domain} task")
        obj = {k: v for k, v in obj.items() if k != "domain"}
    message = spec.from_object(obj)  # the shape first: a missing field is the clearer error
    only_fields(obj, spec.fields, "task")
    return tasks_pb2.Task(**{domain: message})


def _deprecated(form: str, stacklevel: int) -> None:
    warnings.warn(
        f'the {form} task form is deprecated; write {{"domain": …, "task": {{…}}}} '
        "(docs/formats.md §0)",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def parse_task_object(obj: Any, *, stacklevel: int = 2) -> tasks_pb2.Task:
    """The task of a task object.

    The form is ``{"domain": <a registered domain>, "task": {…the domain's object…}}``.
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
        keys = [k for k in domain_names() if k in obj]
        if len(keys) == 1 and len(obj) == 1 and isinstance(obj[keys[0]], Mapping):
            _deprecated(f'protobuf-JSON {{"{keys[0]}": {{…}}}}', stacklevel)
            return make_task(keys[0], obj[keys[0]])
        raise ValueError(_no_domain())
    domain = obj["domain"]
    if not isinstance(domain, str):
        raise ValueError(f"domain: expected a string, got {domain!r}")
    if task_spec(domain) is None:
        raise ValueError(f"domain: expected {domain_choices()}, got {domain!r}")
    if "task" in obj:
        extra = sorted(set(obj) - {"domain", "task"})
        if extra:
            raise ValueError(f"task object: unexpected keys {extra} beside domain and task")
        return make_task(domain, obj["task"])
    _deprecated(f'flat {{"domain": "{domain}", …}}', stacklevel)
    return make_task(domain, {k: v for k, v in obj.items() if k != "domain"})
