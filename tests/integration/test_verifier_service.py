"""Verifier service over real gRPC on loopback: verdicts, receipts, bad input."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from server_helpers import NO_POOL

from certd.config import CertdConfig, MathConfig
from certd.errors import ProofError
from certd.service.server import CertdServer
from certd.signing.dsse import KeyRing
from certd.signing.keys import VerifierKey
from certd.statements import (
    batch_tree,
    receipt_root_from_path,
    task_digest,
    verdict_digest,
    verify_receipt,
    verify_verdict,
)
from certd.v1 import tasks_pb2, verifier_pb2, verifier_pb2_grpc
from forkgate import (
    CertdClient,
    InvalidRequestError,
    ResourceExhaustedError,
    VerifyItem,
    make_task,
)

# Every test here only verifies (receipts append to the ledger, but no test counts entries):
# they share one server per module (tests/conftest.py).
pytestmark = pytest.mark.shared_certd

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}


def test_verify_one_correct_with_receipt(address: str, vkey: str) -> None:
    with CertdClient(address, trusted_keys=[vkey]) as c:
        v = c.verify(
            TASK, "<think>25-5=20, 20*4=80, 80+3=83</think><answer>(25-5)*4+3</answer>", "r1"
        )
    assert v.status == tasks_pb2.CORRECT
    assert v.reward == 1.0
    assert v.family == "25,-"
    assert v.kappa == "countdown.first-op.v1"
    assert v.id == "r1"
    assert v.verifier.startswith("countdown@")


def test_verify_batch_statuses_and_every_verdict_in_receipt(address: str, vkey: str) -> None:
    responses = {
        "<answer>(25-5)*4+3</answer>": tasks_pb2.CORRECT,
        "<answer>25+5+4+3</answer>": tasks_pb2.WRONG_ANSWER,
        "no numbers here": tasks_pb2.INVALID_FORMAT,
        "<answer>25**5</answer>": tasks_pb2.RULE_VIOLATION,
        "<answer>(25-5)*4+3+3</answer>": tasks_pb2.RULE_VIOLATION,
    }
    items = [VerifyItem(TASK, r, f"i{n}") for n, r in enumerate(responses)] * 200
    with CertdClient(address, trusted_keys=[vkey]) as c:
        verdicts = c.verify_batch(items)
    assert len(verdicts) == 1000
    assert [v.status for v in verdicts[:5]] == list(responses.values())
    assert verdicts[1].reward == pytest.approx(0.1)
    assert verdicts[2].reward == 0.0


def test_tampered_verdict_fails_receipt_check(address: str, vkey: str) -> None:
    task = make_task("countdown", TASK["task"])
    req = verifier_pb2.VerifyBatchRequest(
        items=[
            verifier_pb2.VerifyRequest(
                id=str(i), task=task, response=f"<answer>{i}+25-5*4</answer>"
            )
            for i in range(5)
        ]
    )
    with grpc.insecure_channel(address) as ch:
        reply = verifier_pb2_grpc.VerifierStub(ch).VerifyBatch(req, timeout=30)
    keys = KeyRing([VerifierKey.from_vkey(vkey)])
    claim = verify_receipt(reply.receipt, keys)
    for item, v in zip(req.items, reply.verdicts, strict=True):
        verify_verdict(v, task, item.response, claim)
    forged = verifier_pb2.Verdict()
    forged.CopyFrom(reply.verdicts[2])
    forged.status = tasks_pb2.CORRECT
    forged.reward = 1.0
    with pytest.raises(ProofError):
        verify_verdict(forged, task, req.items[2].response, claim)
    with pytest.raises(ProofError):  # the right verdict claimed for another response
        verify_verdict(reply.verdicts[2], task, req.items[3].response, claim)


def test_verify_stream_receipts_cover_groups(address: str, vkey: str, certd_server: object) -> None:
    every = certd_server.cfg.limits.stream_receipt_every  # type: ignore[attr-defined]
    task = make_task("countdown", TASK["task"])
    n = every * 2 + 7
    reqs = [
        verifier_pb2.VerifyRequest(id=str(i), task=task, response=f"<answer>{i}</answer>")
        for i in range(n)
    ]
    with grpc.insecure_channel(address) as ch:
        replies = list(verifier_pb2_grpc.VerifierStub(ch).VerifyStream(iter(reqs), timeout=60))
    verdicts = [r.verdict for r in replies if r.HasField("verdict")]
    receipts = [r.receipt for r in replies if r.HasField("receipt")]
    assert len(verdicts) == n
    assert [r.batch_size for r in receipts] == [every, every, 7]
    keys = KeyRing([VerifierKey.from_vkey(vkey)])
    digest = task_digest(task)
    for seq, receipt in enumerate(receipts):
        claim = verify_receipt(receipt, keys)
        group = [v for v in verdicts if v.receipt_path.receipt_seq == seq]
        digests = [verdict_digest(v, digest, reqs[int(v.id)].response) for v in group]
        assert [v.digest for v in group] == digests
        root, paths = batch_tree(digests)
        assert root == claim.batch_root
        path = verifier_pb2.ReceiptPath(index=1, batch_size=len(digests), hashes=paths[1])
        assert receipt_root_from_path(digests[1], path) == claim.batch_root


def test_bad_requests_get_typed_errors_and_server_keeps_serving(address: str) -> None:
    with grpc.insecure_channel(address) as ch, pytest.raises(grpc.RpcError) as raw:
        verifier_pb2_grpc.VerifierStub(ch).VerifyBatch(verifier_pb2.VerifyBatchRequest(), timeout=9)
    assert raw.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert dict(raw.value.trailing_metadata())["certd-error-field"] == "items"  # one release
    bad = error_details_pb2.BadRequest()
    assert any(d.Unpack(bad) for d in rpc_status.from_call(raw.value).details)
    assert [v.field for v in bad.field_violations] == ["items"]
    with CertdClient(address) as c:
        assert c.verify_batch([]) == []
        with pytest.raises(InvalidRequestError) as e:
            c.verify_batch([(tasks_pb2.Task(), "1+2")])
        assert e.value.field == "items[0].task"
        with pytest.raises(InvalidRequestError) as e:
            c.verify_batch(
                [(TASK, "1"), ({"domain": "countdown", "task": {"numbers": [], "target": 3}}, "3")]
            )
        assert e.value.field.startswith("items[1].task.countdown")
        with pytest.raises(ResourceExhaustedError):
            c.verify_batch(
                [
                    (
                        {
                            "domain": "countdown",
                            "task": {"numbers": list(range(1, 12)), "target": 3},
                        },
                        "3",
                    )
                ]
            )
        # math is served now (issue 4): the same request gets a verdict
        [v] = c.verify_batch([({"domain": "math", "gold": "1/2"}, "\\frac12")])
        assert v.status == tasks_pb2.CORRECT
        assert c.verify(TASK, "<answer>(25-5)*4+3</answer>").status == tasks_pb2.CORRECT


def test_a_domain_not_served_is_a_verdict_per_item_never_a_failed_batch(tmp_path: Path) -> None:
    cfg = CertdConfig(
        data_dir=tmp_path / "d",
        listen="127.0.0.1:0",
        math=MathConfig(enabled=False),
        countdown=NO_POOL,
    )
    server = CertdServer(cfg)
    server.start()
    try:
        half = {"domain": "math", "gold": "1/2"}
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            ok, math = c.verify_batch([(TASK, "<answer>(25-5)*4+3</answer>"), (half, "1/2")])
            assert ok.status == tasks_pb2.CORRECT
            assert math.status == tasks_pb2.INFRA_ERROR
            assert math.detail.startswith("domain 'math' not served here (served: countdown")
            assert c.verify(TASK, "<answer>(25-5)*4+3</answer>").status == tasks_pb2.CORRECT
    finally:
        server.stop(grace_s=1)


def test_batch_over_limit_is_resource_exhausted(address: str, certd_server: object) -> None:
    limit = certd_server.cfg.limits.max_batch_items  # type: ignore[attr-defined]
    task = make_task("countdown", TASK["task"])
    req = verifier_pb2.VerifyBatchRequest(
        items=[verifier_pb2.VerifyRequest(task=task, response="1")] * (limit + 1)
    )
    with grpc.insecure_channel(address) as ch:
        with pytest.raises(grpc.RpcError) as e:
            verifier_pb2_grpc.VerifierStub(ch).VerifyBatch(req, timeout=60)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize(
    "response",
    [
        "(" * 10_000 + "1" + ")" * 10_000,
        "1" * (1 << 20),
        "44**19**35",
        "__import__('os').system('id')",
    ],
    ids=["nested", "1MB", "power-tower", "import"],
)
def test_hostile_responses_get_verdicts(address: str, response: str) -> None:
    with CertdClient(address) as c:
        v = c.verify(TASK, f"<answer>{response}</answer>")
    assert v.status in (tasks_pb2.INVALID_FORMAT, tasks_pb2.RULE_VIOLATION)
    assert v.reward == 0.0
    assert v.detail
