"""Countdown's wire half: ``{"numbers": [...], "target": N, "rules": {...}}`` (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from certd.taskspec import TaskSpec
from certd.taskspec._fields import int_field, only_fields
from certd.v1 import tasks_pb2

__all__ = ["SPEC"]


def from_object(obj: Mapping[str, Any]) -> tasks_pb2.CountdownTask:
    """The message of a Countdown task object (``ValueError`` names the field)."""
    numbers = obj.get("numbers")
    if not isinstance(numbers, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) for n in numbers
    ):
        raise ValueError(f"task.numbers: expected a list of integers, got {numbers!r}")
    rules = obj.get("rules") or {}
    if not isinstance(rules, Mapping):
        raise ValueError(f"task.rules: expected an object, got {rules!r}")
    only_fields(rules, frozenset({"at_most_once", "exactly_once"}), "task.rules")
    at_most_once = bool(rules.get("at_most_once", not rules.get("exactly_once", True)))
    return tasks_pb2.CountdownTask(
        numbers=numbers,
        target=int_field(obj, "target"),
        rules=tasks_pb2.CountdownRules(at_most_once=at_most_once),
    )


def canonical(cd: tasks_pb2.CountdownTask, identity: int) -> dict[str, Any]:
    """The digest's object (the same under every identity version)."""
    return {
        "domain": "countdown",
        "numbers": list(cd.numbers),
        "rules": {"exactly_once": not cd.rules.at_most_once},
        "target": cd.target,
    }


SPEC = TaskSpec(
    name="countdown",
    from_object=from_object,
    canonical=canonical,
    fields=frozenset({"numbers", "target", "rules"}),
    rank=1,
)
