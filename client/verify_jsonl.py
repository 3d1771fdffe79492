"""``forkgate verify-batch``'s engine: JSONL lines in, one output object per line, streaming.

Each output object is the input object unchanged with the verdict fields added
(docs/formats.md §9). At most ``batch_size`` lines are held at a time.

Example::

    with CertdClient(address) as client, open("in.jsonl") as f:
        for obj in verify_lines(client, f, batch_size=1000):
            print(json.dumps(obj))
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from certd.task_object import parse_task_object
from certd.v1 import tasks_pb2, verifier_pb2

from .client import CertdClient
from .errors import InvalidRequestError

__all__ = ["verdict_line", "verify_lines"]


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

    def __init__(self, line_no: int, text: str) -> None:
        self.line_no = line_no
        self.obj: dict[str, Any] = {}
        self.request: verifier_pb2.VerifyRequest | None = None
        self.error: dict[str, Any] | None = None
        try:
            obj = json.loads(text)
        except ValueError as e:
            self.error = _error_fields(line_no, f"not JSON: {e}")
            return
        if not isinstance(obj, dict):
            self.error = _error_fields(line_no, "expected a JSON object")
            return
        self.obj = obj
        try:
            self.request = _request_of(obj, line_no)
        except ValueError as e:
            self.error = _error_fields(line_no, str(e))

    def output(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The input object unchanged, with the verdict (or error) fields added after it."""
        return {**self.obj, **fields}


def _request_of(obj: dict[str, Any], line_no: int) -> verifier_pb2.VerifyRequest:
    """The request of one input object (``domain`` required, never defaulted).

    Raises:
        ValueError: a field is missing or malformed (the message names it).
    """
    if "task" not in obj:
        raise ValueError(
            "task: required (the domain's task object, see docs/formats.md §1); "
            'lines are {"id", "domain", "task", "response"}'
        )
    # the line's "domain" and "task" are the task object; a flat {"domain", …} inside "task"
    # with no line-level domain is the deprecated alias
    task_obj = {"domain": obj["domain"], "task": obj["task"]} if "domain" in obj else obj["task"]
    task = parse_task_object(task_obj, stacklevel=3)
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


def _verify_chunk(client: CertdClient, items: list[_Item]) -> Iterator[dict[str, Any]]:
    """One batch: send the well-formed items, drop a server-rejected one and resend."""
    pending = [it for it in items if it.request is not None]
    results: dict[int, dict[str, Any]] = {}
    while pending:
        try:
            verdicts = client.verify_batch([it.request for it in pending])  # type: ignore[misc]
        except InvalidRequestError as e:
            bad = _bad_index(e)
            if bad is None or bad >= len(pending):
                for it in pending:
                    results[id(it)] = _error_fields(it.line_no, str(e), e.field)
                break
            it = pending.pop(bad)
            results[id(it)] = _error_fields(it.line_no, str(e), e.field[e.field.index("]") + 2 :])
            continue
        for it, v in zip(pending, verdicts, strict=True):
            results[id(it)] = verdict_line(v)
        break
    for it in items:
        yield it.output(it.error if it.error is not None else results[id(it)])


def verify_lines(
    client: CertdClient, lines: Iterable[str], batch_size: int
) -> Iterator[dict[str, Any]]:
    """Verify JSONL lines; yield one output object per non-blank line, in input order.

    Streams: at most ``batch_size`` lines are held at a time. Each output object is the input
    object with the verdict fields added (``"line"`` is the line number in the file, counting
    blank lines).
    """
    if batch_size < 1:
        raise InvalidRequestError(
            f"--batch-size: expected >= 1, got {batch_size}", field="batch_size"
        )
    chunk: list[_Item] = []
    for line_no, text in enumerate(lines, 1):
        if not text.strip():
            continue
        chunk.append(_Item(line_no, text))
        if len(chunk) == batch_size:
            yield from _verify_chunk(client, chunk)
            chunk = []
    if chunk:
        yield from _verify_chunk(client, chunk)
