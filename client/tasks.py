"""Tasks from the one task object ``{"domain": …, "task": {…}}`` (docs/formats.md §0).

Example:
    >>> t = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
    >>> as_task(t).countdown.target
    83
    >>> t = make_task("countdown", {"numbers": [25, 5, 4, 3], "target": 83})
    >>> list(t.countdown.numbers), t.countdown.target
    ([25, 5, 4, 3], 83)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from certd.task_object import make_task, parse_task_object
from certd.v1 import tasks_pb2

__all__ = ["TaskLike", "as_task", "make_task", "task_object"]

TaskLike = tasks_pb2.Task | Mapping[str, Any]


def as_task(task: TaskLike) -> tasks_pb2.Task:
    """Accept a task message or a task object ``{"domain": …, "task": {…}}``.

    The flat ``{"domain": "math", "gold": …}`` (older TRL/verl columns) and protobuf JSON
    ``{"math": {…}}`` still work with a ``DeprecationWarning``. An object without a domain is
    an error: there is no default domain.

    Example:
        >>> as_task({"domain": "math", "task": {"gold": "1/2"}}).math.gold
        '1/2'
        >>> as_task({"numbers": [3, 4], "target": 7})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: domain: required ("countdown", "math" or "code"); a task is ...

    Raises:
        ValueError: the object is malformed or names no domain.
    """
    if isinstance(task, tasks_pb2.Task):
        return task
    return parse_task_object(task, stacklevel=3)


def task_object(domain: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The task object of a domain's own object: ``{"domain": domain, "task": obj}``.

    Example:
        >>> task_object("math", {"gold": "2"})
        {'domain': 'math', 'task': {'gold': '2'}}
    """
    return {"domain": domain, "task": dict(obj)}
