"""Typed Python results: enum statuses and plain fields over the protobuf verdicts."""

from __future__ import annotations

import asyncio

from certd.v1 import tasks_pb2, verifier_pb2
from forkgate import AsyncCertdClient, CertdClient, Status, TypedVerdict

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}


def test_status_mirrors_the_proto_enum() -> None:
    proto = dict(tasks_pb2.VerdictStatus.items())
    assert {s.name: s.value for s in Status} == proto
    assert tasks_pb2.CORRECT == Status.CORRECT  # compares with the protobuf field too


def test_typed_verdicts_from_both_clients(address: str, vkey: str) -> None:
    with CertdClient(address, trusted_keys=[vkey]) as c:
        good = c.verify(TASK, "<answer>(25-5)*4+3</answer>", "r1")
        wrong, junk = c.verify_batch([(TASK, "<answer>25+5+4+3</answer>"), (TASK, "hi")])
        pb = c.verify_pb(TASK, "<answer>(25-5)*4+3</answer>", "r2")
        [pb_wrong] = c.verify_batch_pb([(TASK, "<answer>25+5+4+3</answer>")])
        [alias] = c.verify_batch_typed([(TASK, "hi")])  # the older name, the same result
    assert isinstance(good, TypedVerdict) and good.status is Status.CORRECT and good.correct
    assert (good.id, good.reward, good.family) == ("r1", 1.0, "25,-")
    assert good.kappa == "countdown.first-op.v1" and good.verifier and good.pb.digest
    assert wrong.status is Status.WRONG_ANSWER and not wrong.correct and wrong.family == "25,+"
    assert junk.status is not Status.CORRECT and isinstance(junk.status, Status)
    assert alias.status is junk.status and junk.status == int(junk.pb.status)
    # the protobuf stays reachable: on each verdict (.pb) and from the *_pb methods
    assert isinstance(pb, verifier_pb2.Verdict) and pb.status == Status.CORRECT
    assert pb.family.value == "25,-" and pb_wrong.status == tasks_pb2.WRONG_ANSWER
    assert isinstance(good.pb, verifier_pb2.Verdict) and good.pb.family.value == "25,-"

    async def typed() -> list[TypedVerdict]:
        async with AsyncCertdClient(address) as a:
            one = await a.verify(TASK, "<answer>(25-5)*4+3</answer>")
            pb = await a.verify_pb(TASK, "<answer>(25-5)*4+3</answer>")
            assert isinstance(pb, verifier_pb2.Verdict) and pb.status == Status.CORRECT
            return [one, *await a.verify_batch([(TASK, "hi")])]

    one, other = asyncio.run(typed())
    assert one.status is Status.CORRECT and other.status is junk.status
