"""A stored idempotent reply is replayed only when its logged items are the ledger's entries."""

from __future__ import annotations

import pytest

from certd.ledger.store.sqlite import SQLiteStore
from certd.service.replycheck import ReplayCheck, ReplayRefusedError
from certd.v1 import authority_pb2, ledger_pb2, verifier_pb2

CERTIFY_BATCH = "/certd.v1.Authority/CertifyBatch"


def certificate(index: int, envelope: bytes, leaf: int | None = None) -> authority_pb2.Certificate:
    inclusion = ledger_pb2.InclusionProof(leaf_index=index if leaf is None else leaf, tree_size=3)
    return authority_pb2.Certificate(envelope=envelope, ledger_index=index, inclusion=inclusion)


def batch(*certs: authority_pb2.Certificate) -> bytes:
    results = [authority_pb2.CertifyResult(certificate=c) for c in certs]
    return authority_pb2.CertifyBatchResponse(results=results).SerializeToString()


@pytest.fixture()
def check() -> ReplayCheck:
    store = SQLiteStore(":memory:")
    store.append([(None, b"env-0"), (None, b"env-1"), (None, b"env-2")])
    return ReplayCheck(store)


def test_a_reply_holding_the_ledgers_entries_replays(check: ReplayCheck) -> None:
    check(CERTIFY_BATCH, batch(certificate(0, b"env-0"), certificate(2, b"env-2")))
    receipt = verifier_pb2.Receipt(
        envelope=b"env-1", inclusion=ledger_pb2.InclusionProof(leaf_index=1, tree_size=3)
    )
    reply = verifier_pb2.VerifyBatchResponse(receipt=receipt).SerializeToString()
    check("/certd.v1.Verifier/VerifyBatch", reply)


@pytest.mark.parametrize(
    ("method", "reply"),
    [
        (CERTIFY_BATCH, batch(certificate(1, b"forged envelope"))),  # not the entry there
        (CERTIFY_BATCH, batch(certificate(0, b"env-0"), certificate(7, b"env-2"))),  # beyond
        (CERTIFY_BATCH, batch(certificate(2, b"env-2", leaf=1))),  # proof for another entry
        (CERTIFY_BATCH, b"\xff\xff not a protobuf"),
        ("/certd.v1.Nowhere/Nothing", b""),
        (
            "/certd.v1.Verifier/VerifyBatch",
            verifier_pb2.VerifyBatchResponse(
                receipt=verifier_pb2.Receipt(
                    envelope=b"env-0", inclusion=ledger_pb2.InclusionProof(leaf_index=1)
                )
            ).SerializeToString(),
        ),
    ],
    ids=["forged-envelope", "index-beyond", "proof-index", "garbage", "unknown-method", "receipt"],
)
def test_a_planted_reply_is_refused(check: ReplayCheck, method: str, reply: bytes) -> None:
    with pytest.raises(ReplayRefusedError, match="refusing to replay"):
        check(method, reply)
