"""The Verifier service's task cache: one conversion per distinct task across batches, bounded."""

from __future__ import annotations

import pytest

from certd.config import load_config
from certd.errors import InvalidInputError
from certd.service.verifier import _TaskCache
from certd.v1 import tasks_pb2, verifier_pb2


def _request(target: int) -> verifier_pb2.VerifyRequest:
    task = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[1, 2, 3], target=target))
    return verifier_pb2.VerifyRequest(id="r", task=task, response="<answer>1+2+3</answer>")


def test_a_task_is_converted_once_across_batches() -> None:
    cache = _TaskCache(load_config(None))
    first = cache.get(_request(6), "items[0].task")
    again = cache.get(_request(6), "items[5].task")  # another request (batch), the same task
    assert again is first
    assert first.pb == _request(6).task and first.pb is not _request(6).task


def test_the_oldest_tasks_are_forgotten_past_the_bounds() -> None:
    cache = _TaskCache(load_config(None), max_entries=2)
    kept = [cache.get(_request(t), "task") for t in (1, 2, 3)]
    assert cache.get(_request(3), "task") is kept[2]
    assert cache.get(_request(1), "task") is not kept[0]  # evicted, converted again
    small = _TaskCache(load_config(None), max_bytes=1)  # no task fits: nothing is kept
    assert small.get(_request(1), "task") is not small.get(_request(1), "task")


def test_a_malformed_task_raises_each_time_with_its_field() -> None:
    cache = _TaskCache(load_config(None))
    bad = verifier_pb2.VerifyRequest(id="r", task=tasks_pb2.Task(), response="x")
    for field in ("items[0].task", "items[3].task"):
        with pytest.raises(InvalidInputError) as e:
            cache.get(bad, field)
        assert e.value.field == field
