"""The services' task cache: one conversion per distinct task across RPCs and batches, bounded."""

from __future__ import annotations

import pytest

from certd.config import load_config
from certd.errors import InvalidInputError
from certd.service.taskcache import TaskCache
from certd.v1 import tasks_pb2, verifier_pb2


def _request(target: int) -> tasks_pb2.Task:
    """The task of a VerifyRequest (the cache converts the message it is given)."""
    task = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[1, 2, 3], target=target))
    return verifier_pb2.VerifyRequest(id="r", task=task, response="<answer>1+2+3</answer>").task


def test_a_task_is_converted_once_across_batches() -> None:
    cache = TaskCache(load_config(None))
    given = _request(6)
    first = cache.get(given, "items[0].task")
    again = cache.get(_request(6), "items[5].task")  # another request (batch), the same task
    assert again is first
    assert first.pb == given and first.pb is not given  # a copy: the request is not kept


def test_the_oldest_tasks_are_forgotten_past_the_bounds() -> None:
    cache = TaskCache(load_config(None), max_entries=2)
    kept = [cache.get(_request(t), "task") for t in (1, 2, 3)]
    assert cache.get(_request(3), "task") is kept[2]
    assert cache.get(_request(1), "task") is not kept[0]  # evicted, converted again
    small = TaskCache(load_config(None), max_bytes=1)  # no task fits: nothing is kept
    assert small.get(_request(1), "task") is not small.get(_request(1), "task")


def test_a_malformed_task_raises_each_time_with_its_field() -> None:
    cache = TaskCache(load_config(None))
    bad = tasks_pb2.Task()
    for field in ("items[0].task", "items[3].task"):
        with pytest.raises(InvalidInputError) as e:
            cache.get(bad, field)
        assert e.value.field == field
