"""A declared precision is part of the task: it changes what is equal, so it changes the digest.

Attack: a receipt or certificate earned under ``precision_digits`` (a tolerance) must not pass
for the exact task with the same gold, and the reverse.
"""

from __future__ import annotations

from certd.statements import task_digest, task_json
from forkgate.tasks import make_task


def test_precision_changes_the_task_digest() -> None:
    exact = make_task("math", {"gold": "3.14159"})
    loose = make_task("math", {"gold": "3.14159", "precision_digits": 3})
    looser = make_task("math", {"gold": "3.14159", "precision_digits": 2})
    digests = {task_digest(exact), task_digest(loose), task_digest(looser)}
    assert len(digests) == 3


def test_exact_task_object_is_unchanged() -> None:
    # Digests of exact math tasks (every certificate issued before precision existed) stay put.
    assert task_json(make_task("math", {"gold": r"\frac{1}{2}"})) == {
        "domain": "math",
        "gold": r"\frac{1}{2}",
    }


def test_task_json_round_trips_with_precision() -> None:
    task = make_task("math", {"gold": "2.5", "precision_digits": 4})
    obj = task_json(task)
    assert obj["precision_digits"] == 4
    again = make_task("math", {k: v for k, v in obj.items() if k != "domain"})
    assert task_digest(again) == task_digest(task)
