"""The one task cache every RPC converts its wire tasks through.

Example:
    >>> from certd.config import CertdConfig
    >>> from certd.v1 import tasks_pb2
    >>> cache = TaskCache(CertdConfig())
    >>> pb = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83))
    >>> cache.get(pb, "task") is cache.get(tasks_pb2.Task.FromString(pb.SerializeToString()), "x")
    True
"""

from __future__ import annotations

import dataclasses
import threading

from certd.authority.results import CheckedTask
from certd.config import CertdConfig
from certd.service.convert import checked_task
from certd.v1 import tasks_pb2

__all__ = ["TaskCache"]


class TaskCache:
    """Converts each distinct task once, across RPCs and batches (rollout batches repeat tasks
    n times, the next batch asks about the same tasks again, a CertifyBatch certifies many
    labels of one task).

    A miss converts the message it has (``convert.checked_task``: validation, digest, domain
    value); what is kept holds a copy of the wire task, so it never keeps a request alive.
    Bounded: past ``max_entries`` tasks or ``max_bytes`` of wire tasks the oldest are
    forgotten. Thread-safe: the gRPC threads of every service share one cache.
    """

    def __init__(self, cfg: CertdConfig, max_entries: int = 4096, max_bytes: int = 8 << 20) -> None:
        self._cfg = cfg
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._seen: dict[bytes, CheckedTask] = {}
        self._lock = threading.Lock()

    def get(self, task: tasks_pb2.Task, field: str) -> CheckedTask:
        """The checked task of a wire task (``field`` names it in errors).

        Raises:
            InvalidInputError, LimitExceededError, UnsupportedError: as ``checked_task``.
        """
        raw = task.SerializeToString(deterministic=True)
        hit = self._seen.get(raw)
        if hit is not None:
            return hit
        checked = checked_task(task, self._cfg, field)
        if len(raw) > self._max_bytes:
            return checked
        own = tasks_pb2.Task()
        own.CopyFrom(task)  # the request's message stays the request's
        hit = dataclasses.replace(checked, pb=own)
        with self._lock:
            while self._seen and (
                len(self._seen) >= self._max_entries or self._bytes + len(raw) > self._max_bytes
            ):
                oldest = next(iter(self._seen))
                self._bytes -= len(oldest)
                del self._seen[oldest]
            if raw not in self._seen:
                self._seen[raw] = hit
                self._bytes += len(raw)
        return hit
