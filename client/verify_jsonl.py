"""``forkgate verify-batch``'s engine: JSONL lines in, one output object per line, streaming.

Each output object is the input object unchanged with the verdict fields added
(docs/formats.md §9). Batches are pipelined: while certd checks one, the next ones are read,
parsed and sent (``inflight`` batches at most), so at most ``inflight × batch_size`` lines are
held at a time, whatever the file's length.

Example::

    with CertdClient(address) as client, open("in.jsonl", "rb") as f:
        for obj in verify_lines(client, f, batch_size=1000):
            print(json.dumps(obj))
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import orjson

from certd.task_object import parse_task_object
from certd.v1 import tasks_pb2, verifier_pb2

from .client import CertdClient
from .errors import InvalidRequestError

__all__ = ["dumps_line", "verdict_line", "verify_lines"]

_TASK_CACHE_SIZE = 4096  # distinct task objects remembered (a GRPO group repeats its task)


def loads_line(text: str | bytes) -> Any:
    """One JSON line (orjson; the standard library for what orjson refuses, e.g. a 100-digit
    integer, and for its error message).

    Raises:
        ValueError: not JSON.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def dumps_line(obj: Any) -> bytes:
    """One output line, newline included (orjson; the standard library for what it refuses)."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError: an integer past 64 bits, say
        return (json.dumps(obj) + "\n").encode()


def verdict_line(v: verifier_pb2.Verdict) -> dict[str, Any]:
    """The verdict fields of one JSONL output line (verify-batch adds them to the input's)."""
    return {
        "status": tasks_pb2.VerdictStatus.Name(v.status),
        "reward": v.reward,
        "family": v.family.value if v.HasField("family") else None,
        "kappa": v.family.kappa if v.HasField("family") else None,
        "initiated": v.initiated.value if v.HasField("initiated") else None,
        "labels": {label.kappa: label.value for label in v.labels},
        "detail": v.detail,
        "verifier": v.verifier,
        "elapsed_ms": round(v.elapsed_ms, 4),
    }


def _error_fields(line_no: int, message: str, field: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"line": line_no, "status": "ERROR", "error": message}
    return {**out, "field": field} if field else out


class _Item:
    """One non-blank input line: its file line number, its object, and its request or error."""

    __slots__ = ("error", "line_no", "obj", "request")

    def __init__(self, line_no: int, text: str | bytes, tasks: _TaskCache) -> None:
        self.line_no = line_no
        self.obj: dict[str, Any] = {}
        self.request: verifier_pb2.VerifyRequest | None = None
        self.error: dict[str, Any] | None = None
        try:
            obj = loads_line(text)
        except ValueError as e:
            self.error = _error_fields(line_no, f"not JSON: {e}")
            return
        if not isinstance(obj, dict):
            self.error = _error_fields(line_no, "expected a JSON object")
            return
        self.obj = obj
        try:
            self.request = _request_of(obj, line_no, tasks)
        except ValueError as e:
            self.error = _error_fields(line_no, str(e))

    def output(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The input object unchanged, with the verdict (or error) fields added after it."""
        return {**self.obj, **fields}


class _TaskCache:
    """Parsed tasks by their JSON text, the oldest forgotten past ``size`` (bounded memory)."""

    def __init__(self, size: int = _TASK_CACHE_SIZE) -> None:
        self._size = size
        self._tasks: dict[bytes, tasks_pb2.Task] = {}

    def get(self, task_obj: Any) -> tasks_pb2.Task:
        """The task of a task object (parsed once per distinct object).

        Raises:
            ValueError: not a task object (the message names the field).
        """
        try:
            key = orjson.dumps(task_obj, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            return parse_task_object(task_obj, stacklevel=4)
        task = self._tasks.get(key)
        if task is None:
            task = parse_task_object(task_obj, stacklevel=4)
            if len(self._tasks) >= self._size:
                del self._tasks[next(iter(self._tasks))]
            self._tasks[key] = task
        return task


def _request_of(obj: dict[str, Any], line_no: int, tasks: _TaskCache) -> verifier_pb2.VerifyRequest:
    """The request of one input object (``domain`` required, never defaulted).

    Raises:
        ValueError: a field is missing or malformed (the message names it).
    """
    if "task" not in obj:
        raise ValueError(
            "task: required (the domain's task object, see docs/formats.md §0); "
            'lines are {"id", "domain", "task", "response"}'
        )
    # the line's "domain" and "task" are the task object; a flat {"domain", …} inside "task"
    # with no line-level domain is the deprecated alias
    task_obj = {"domain": obj["domain"], "task": obj["task"]} if "domain" in obj else obj["task"]
    task = tasks.get(task_obj)
    response = obj.get("response")
    if not isinstance(response, str):
        raise ValueError(f"response: expected a string, got {type(response).__name__}")
    item_id = obj.get("id")
    return verifier_pb2.VerifyRequest(
        id=str(item_id if item_id is not None else line_no), task=task, response=response
    )


def _bad_index(error: InvalidRequestError) -> int | None:
    """The item index a server-side INVALID_ARGUMENT names (``items[17].task...``)."""
    if error.field.startswith("items["):
        try:
            return int(error.field[6 : error.field.index("]")])
        except ValueError:
            return None
    return None


_Outcome = dict[str, Any] | verifier_pb2.Verdict
"""An item's error fields, or its verdict (made a line by the reader, off the sending thread)."""


def _verify_chunk(client: CertdClient, items: list[_Item]) -> list[_Outcome]:
    """One batch: send the well-formed items, drop a server-rejected one and resend; each
    item's outcome, in input order."""
    pending = [it for it in items if it.request is not None]
    results: dict[int, _Outcome] = {}
    while pending:
        try:
            verdicts = client.verify_batch_pb([it.request for it in pending])  # type: ignore[misc]
        except InvalidRequestError as e:
            bad = _bad_index(e)
            if bad is None or bad >= len(pending):
                for it in pending:
                    results[id(it)] = _error_fields(it.line_no, str(e), e.field)
                break
            it = pending.pop(bad)
            results[id(it)] = _error_fields(it.line_no, str(e), e.field[e.field.index("]") + 2 :])
            continue
        results.update(zip(map(id, pending), verdicts, strict=True))
        break
    return [it.error if it.error is not None else results[id(it)] for it in items]


def _outputs(items: list[_Item], sent: Future[list[_Outcome]]) -> Iterator[dict[str, Any]]:
    """A chunk's output objects: the input objects with their verdict or error fields."""
    for it, outcome in zip(items, sent.result(), strict=True):
        yield it.output(outcome if isinstance(outcome, dict) else verdict_line(outcome))


def _chunks(lines: Iterable[str | bytes], batch_size: int) -> Iterator[list[_Item]]:
    """Parsed items, ``batch_size`` non-blank lines at a time (file line numbers kept)."""
    tasks = _TaskCache()
    chunk: list[_Item] = []
    for line_no, text in enumerate(lines, 1):
        if not text.strip():
            continue
        chunk.append(_Item(line_no, text, tasks))
        if len(chunk) == batch_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def verify_lines(
    client: CertdClient, lines: Iterable[str | bytes], batch_size: int, inflight: int = 4
) -> Iterator[dict[str, Any]]:
    """Verify JSONL lines; yield one output object per non-blank line, in input order.

    Streams: ``inflight`` VerifyBatch calls of ``batch_size`` lines run at once while the next
    lines are read, so at most ``(inflight + 1) × batch_size`` lines are held. Each output
    object is the input object with the verdict fields added (an error line also names
    ``"line"``, the line number in the file, counting blank lines).

    Raises:
        InvalidRequestError: ``batch_size`` or ``inflight`` below 1.
    """
    if batch_size < 1:
        raise InvalidRequestError(
            f"--batch-size: expected >= 1, got {batch_size}", field="batch_size"
        )
    if inflight < 1:
        raise InvalidRequestError(f"--inflight: expected >= 1, got {inflight}", field="inflight")
    with ThreadPoolExecutor(inflight, thread_name_prefix="verify-batch") as pool:
        running: deque[tuple[list[_Item], Future[list[_Outcome]]]] = deque()
        try:
            for chunk in _chunks(lines, batch_size):
                running.append((chunk, pool.submit(_verify_chunk, client, chunk)))
                while len(running) > inflight or (running and running[0][1].done()):
                    yield from _outputs(*running.popleft())
            while running:
                yield from _outputs(*running.popleft())
        finally:
            for _, f in running:
                f.cancel()
