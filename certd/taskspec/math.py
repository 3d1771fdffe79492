"""The math domain's wire half: ``{"gold": …, "precision_digits": N, "question": …}`` (pure)."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from certd.taskspec import TaskSpec
from certd.v1 import tasks_pb2

__all__ = ["SPEC", "normalise_question"]


def normalise_question(text: str) -> str:
    """A question as the digest covers it: Unicode NFC, whitespace runs collapsed to one
    space, no leading or trailing whitespace."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def from_object(obj: Mapping[str, Any]) -> tasks_pb2.MathTask:
    """The message of a math task object (only ``gold`` required)."""
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


def canonical(task: tasks_pb2.MathTask, identity: int) -> dict[str, Any]:
    """The digest's object: gold, a declared precision, and (identity 2) the question."""
    # A declared precision changes what counts as equal, so it is part of the task (and of
    # every digest bound to it); an exact task keeps the object it always had.
    out: dict[str, Any] = {"domain": "math", "gold": task.gold}
    if task.precision_digits:
        out["precision_digits"] = task.precision_digits
    question = normalise_question(task.question) if identity >= 2 else ""
    if question:  # two questions with one gold are two tasks
        out["question"] = question
        out["task_identity"] = 2
    return out


def identity_gap(task: tasks_pb2.MathTask) -> tuple[str, str] | None:
    """A math task without its question is its gold alone (``TaskSpec.identity_gap``)."""
    if normalise_question(task.question):
        return None
    return (
        "question",
        "a math task is its question with its gold (two questions with one gold are two tasks)",
    )


SPEC = TaskSpec(
    name="math",
    from_object=from_object,
    canonical=canonical,
    # ``task_identity`` is what ``task_json`` writes for a math task with a question.
    fields=frozenset({"gold", "precision_digits", "question", "task_identity"}),
    rank=2,
    identity_gap=identity_gap,
)
