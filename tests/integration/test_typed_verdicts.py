"""Typed Python results: enum statuses and plain fields over the protobuf verdicts."""

from __future__ import annotations

import asyncio

from certd.v1 import tasks_pb2
from forkgate import AsyncCertdClient, CertdClient, Status, TypedVerdict

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}


def test_status_mirrors_the_proto_enum() -> None:
    proto = dict(tasks_pb2.VerdictStatus.items())
    assert {s.name: s.value for s in Status} == proto
    assert tasks_pb2.CORRECT == Status.CORRECT  # compares with the protobuf field too


def test_typed_verdicts_from_both_clients(address: str, vkey: str) -> None:
    with CertdClient(address, trusted_keys=[vkey]) as c:
        good = c.verify_typed(TASK, "<answer>(25-5)*4+3</answer>", "r1")
        wrong, junk = c.verify_batch_typed([(TASK, "<answer>25+5+4+3</answer>"), (TASK, "hi")])
    assert isinstance(good, TypedVerdict) and good.status is Status.CORRECT and good.correct
    assert (good.id, good.reward, good.family) == ("r1", 1.0, "25,-")
    assert good.kappa == "countdown.first-op.v1" and good.verifier and good.pb.digest
    assert wrong.status is Status.WRONG_ANSWER and not wrong.correct and wrong.family == "25,+"
    assert junk.status is not Status.CORRECT and isinstance(junk.status, Status)

    async def typed() -> list[TypedVerdict]:
        async with AsyncCertdClient(address) as a:
            one = await a.verify_typed(TASK, "<answer>(25-5)*4+3</answer>")
            return [one, *await a.verify_batch_typed([(TASK, "hi")])]

    one, other = asyncio.run(typed())
    assert one.status is Status.CORRECT and other.status is junk.status
