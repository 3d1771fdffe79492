"""Hypothesis fuzzing of the request handlers over real gRPC: typed errors, never INTERNAL."""

from __future__ import annotations

import grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certd.v1 import authority_pb2, tasks_pb2, verifier_pb2

ALPHABET = st.sampled_from([*"0123456789+-*/()×÷ <>=answer/\n.,eE_[]'\"", "**", "//", "%"])
TEXT = st.one_of(st.text(max_size=300), st.lists(ALPHABET, max_size=120).map("".join))

ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.UNIMPLEMENTED,
}

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _code(call: object) -> grpc.StatusCode:
    try:
        call()  # type: ignore[operator]
    except grpc.RpcError as e:
        return e.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


@FUZZ
@given(
    numbers=st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=12),
    target=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    response=TEXT,
    at_most_once=st.booleans(),
)
def test_verify_and_certify_fuzz(
    address: str, numbers: list[int], target: int, response: str, at_most_once: bool
) -> None:
    task = tasks_pb2.Task(
        countdown=tasks_pb2.CountdownTask(
            numbers=numbers,
            target=target,
            rules=tasks_pb2.CountdownRules(at_most_once=at_most_once),
        )
    )
    with grpc.insecure_channel(address) as ch:
        verify = ch.unary_unary(
            "/certd.v1.Verifier/VerifyBatch",
            request_serializer=verifier_pb2.VerifyBatchRequest.SerializeToString,
            response_deserializer=verifier_pb2.VerifyBatchResponse.FromString,
        )
        req = verifier_pb2.VerifyBatchRequest(
            items=[verifier_pb2.VerifyRequest(task=task, response=response)]
        )
        assert _code(lambda: verify(req, timeout=30)) in ALLOWED
        certify = ch.unary_unary(
            "/certd.v1.Authority/Certify",
            request_serializer=authority_pb2.CertifyRequest.SerializeToString,
            response_deserializer=authority_pb2.CertifyResponse.FromString,
        )
        creq = authority_pb2.CertifyRequest(
            task=task, label=tasks_pb2.Label(value=response[:20]), witness=response
        )
        assert _code(lambda: certify(creq, timeout=30)) in ALLOWED


@FUZZ
@given(
    raw=st.binary(max_size=400),
    method=st.sampled_from(
        [
            "/certd.v1.Verifier/Verify",
            "/certd.v1.Verifier/VerifyBatch",
            "/certd.v1.Authority/Certify",
            "/certd.v1.Authority/CertifyBatch",
            "/certd.v1.Authority/GetCertificate",
            "/certd.v1.Authority/GetForkTree",
            "/certd.v1.Authority/EnumerateFamilies",
            "/certd.v1.Ledger/GetEntries",
            "/certd.v1.Ledger/GetInclusionProof",
            "/certd.v1.Ledger/GetConsistencyProof",
            "/certd.v1.Ledger/GetCheckpoint",
        ]
    ),
)
def test_garbage_bytes_never_crash_a_handler(address: str, raw: bytes, method: str) -> None:
    with grpc.insecure_channel(address) as ch:
        call = ch.unary_unary(
            method, request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        code = _code(lambda: call(raw, timeout=30))
    # Bytes that do not parse as the request message are rejected by gRPC itself (INTERNAL
    # "Exception deserializing request!") before any handler runs; everything else is typed.
    assert code in ALLOWED | {grpc.StatusCode.INTERNAL}
    if code == grpc.StatusCode.INTERNAL:
        assert _is_undeserializable(method, raw)
    with grpc.insecure_channel(address) as ch:  # and the server still serves
        ok = ch.unary_unary(
            "/certd.v1.Ledger/GetCheckpoint",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        assert ok(b"", timeout=30)


def _is_undeserializable(method: str, raw: bytes) -> bool:
    from google.protobuf.message import DecodeError

    from certd.v1 import ledger_pb2

    types = {
        "Verify": verifier_pb2.VerifyRequest,
        "VerifyBatch": verifier_pb2.VerifyBatchRequest,
        "Certify": authority_pb2.CertifyRequest,
        "CertifyBatch": authority_pb2.CertifyBatchRequest,
        "GetCertificate": authority_pb2.GetCertificateRequest,
        "GetForkTree": authority_pb2.GetForkTreeRequest,
        "EnumerateFamilies": authority_pb2.EnumerateFamiliesRequest,
        "GetEntries": ledger_pb2.GetEntriesRequest,
        "GetInclusionProof": ledger_pb2.GetInclusionProofRequest,
        "GetConsistencyProof": ledger_pb2.GetConsistencyProofRequest,
        "GetCheckpoint": ledger_pb2.GetCheckpointRequest,
    }
    try:
        types[method.rsplit("/", 1)[1]].FromString(raw)
    except DecodeError:
        return True
    return False
