"""``verify_lines``' pipelining with a fake client: order kept with several batches in flight,
a server-rejected item reported with its own file line, input read ahead by a bounded amount."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from certd.v1 import tasks_pb2, verifier_pb2
from forkgate.errors import InvalidRequestError
from forkgate.verify_jsonl import verify_lines

TASK = {"numbers": [25, 5, 4, 3], "target": 83}


class FakeClient:
    """Answers VerifyBatch in another order than asked (later calls finish first) and refuses a
    response ``"bad"`` as the server does: INVALID_ARGUMENT naming ``items[i]``."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    def verify_batch_pb(self, requests: Sequence[verifier_pb2.VerifyRequest]) -> list[Any]:
        with self._lock:
            self.calls.append([r.id for r in requests])
            call = len(self.calls)
        time.sleep(0.05 if call % 2 else 0.0)  # odd calls slower: replies arrive out of order
        for i, r in enumerate(requests):
            if r.response == "bad":
                raise InvalidRequestError("response: refused", field=f"items[{i}].response")
        return [
            verifier_pb2.Verdict(id=r.id, status=tasks_pb2.CORRECT, elapsed_ms=float(i))
            for i, r in enumerate(requests)
        ]


def _line(i: int, response: str = "<answer>(25-5)*4+3</answer>") -> bytes:
    row = {"id": i, "domain": "countdown", "task": TASK, "response": response, "extra": [i]}
    return json.dumps(row).encode()


def test_outputs_keep_input_order_with_batches_in_flight() -> None:
    client = FakeClient()
    lines = [_line(i) for i in range(50)]
    out = list(verify_lines(client, lines, batch_size=3, inflight=4))  # type: ignore[arg-type]
    assert [o["id"] for o in out] == list(range(50))
    assert [o["extra"] for o in out] == [[i] for i in range(50)]  # input fields unchanged
    assert all(o["status"] == "CORRECT" for o in out)
    assert len(client.calls) == 17


def test_an_item_refused_in_a_later_batch_names_its_file_line() -> None:
    lines = [_line(i) for i in range(10)]
    lines[7] = _line(7, response="bad")  # the third batch of 3
    lines.insert(2, b"")  # a blank line: file lines count it
    out = list(verify_lines(FakeClient(), lines, batch_size=3, inflight=2))  # type: ignore[arg-type]
    assert [o["id"] for o in out] == list(range(10))
    bad = out[7]
    assert bad["status"] == "ERROR" and bad["line"] == 9 and bad["field"] == "response"
    assert [o["status"] for o in out].count("CORRECT") == 9  # the rest of its batch resent


def test_input_is_read_ahead_by_at_most_inflight_plus_one_batches() -> None:
    read = 0

    def lines() -> Iterator[bytes]:
        nonlocal read
        for i in range(10_000):
            read += 1
            yield _line(i)

    batch_size, inflight = 10, 3
    outputs = verify_lines(FakeClient(), lines(), batch_size, inflight)  # type: ignore[arg-type]
    for n, _ in enumerate(outputs, 1):
        assert read - n <= (inflight + 1) * batch_size
        if n == 500:
            break
    outputs.close()  # stops reading: the rest of the input is never touched
    assert read < 600


def test_the_cli_starts_without_signing_or_package_metadata() -> None:
    """Start-up is part of every verify-batch run: the signing stack (cryptography) loads only
    when ``--trust`` asks for receipt checks, package metadata only for ``--version``."""
    code = "import sys, forkgate.cli\nprint(' '.join(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(run.stdout.split())
    assert not loaded & {"certd.signing", "certd.statements", "cryptography"}
    assert "importlib.metadata" not in loaded
