"""certd's errors carry standard ``google.rpc.Status`` details (AIP-193); forkgate reads them.

A refusal is FAILED_PRECONDITION with ``ErrorInfo`` (domain ``certd``, reason the refusal
code); malformed input is INVALID_ARGUMENT with a ``BadRequest`` field violation; every error
has ``RequestInfo`` with its request id. The old ``certd-*`` trailers still come, for one
release (docs/wire-api.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from certd.errors import CertificationRefusedError as Refusal
from certd.errors import InvalidInputError, RateLimitedError
from certd.service.interceptors import ERROR_DOMAIN, error_details
from certd.v1 import authority_pb2_grpc, verifier_pb2, verifier_pb2_grpc
from forkgate import (
    AsyncCertdClient,
    CertdClient,
    CertificationRefusedError,
    InvalidRequestError,
    ServerError,
)
from forkgate._base import certify_request, map_rpc_error

# One server for the module (tests/conftest.py): every certify here is refused.
pytestmark = pytest.mark.shared_certd

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
EMPTY = {"domain": "countdown", "task": {"numbers": [], "target": 3}}  # certd refuses it


def _unpacked(error: grpc.RpcError) -> dict[str, Any]:
    status = rpc_status.from_call(error)
    assert status is not None, "no google.rpc.Status details"
    out: dict[str, Any] = {}
    for kind in (
        error_details_pb2.ErrorInfo,
        error_details_pb2.BadRequest,
        error_details_pb2.RequestInfo,
    ):
        for detail in status.details:
            msg = kind()
            if detail.Unpack(msg):
                out[kind.__name__] = msg
    return out


def test_a_refusal_carries_error_info_and_a_request_id(address: str) -> None:
    req = certify_request(TASK, "25,-", "25-5*4+3")
    with grpc.insecure_channel(address) as ch, pytest.raises(grpc.RpcError) as raw:
        authority_pb2_grpc.AuthorityStub(ch).Certify(req, timeout=30)
    assert raw.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    got = _unpacked(raw.value)
    info = got["ErrorInfo"]
    assert (info.domain, info.reason) == (ERROR_DOMAIN, "WITNESS_NOT_CORRECT")
    trailers = dict(raw.value.trailing_metadata())
    assert got["RequestInfo"].request_id == trailers["certd-request-id"] != ""
    assert trailers["certd-refusal-reason"] == "WITNESS_NOT_CORRECT"  # old clients, one release
    assert "BadRequest" not in got


def test_invalid_input_carries_a_field_violation(address: str) -> None:
    with grpc.insecure_channel(address) as ch, pytest.raises(grpc.RpcError) as raw:
        verifier_pb2_grpc.VerifierStub(ch).VerifyBatch(verifier_pb2.VerifyBatchRequest(), timeout=9)
    assert raw.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    got = _unpacked(raw.value)
    [violation] = got["BadRequest"].field_violations
    assert violation.field == "items" and violation.description == raw.value.details()
    assert "ErrorInfo" not in got


def test_both_clients_read_the_details_into_typed_errors(address: str) -> None:
    with CertdClient(address) as c:
        with pytest.raises(CertificationRefusedError) as refused:
            c.certify(TASK, "4,*", "(25-5)*4+3")
        with pytest.raises(InvalidRequestError) as invalid:
            c.verify_batch([(EMPTY, "3")])
    assert refused.value.reason == "LABEL_MISMATCH" and refused.value.request_id
    assert invalid.value.field.startswith("items[0].task.countdown") and invalid.value.request_id

    async def run() -> tuple[str, str]:
        async with AsyncCertdClient(address) as c:
            with pytest.raises(CertificationRefusedError) as refused:
                await c.certify(TASK, "4,*", "(25-5)*4+3")
            with pytest.raises(InvalidRequestError) as invalid:
                await c.verify_batch([(EMPTY, "3")])
        return refused.value.reason, invalid.value.field

    reason, field = asyncio.run(run())
    assert reason == "LABEL_MISMATCH" and field.startswith("items[0].task.countdown")


def test_detail_kinds_per_error() -> None:
    kinds = [
        sorted(type(d).__name__ for d in error_details(error, "rid"))
        for error in (
            Refusal("no", reason="PSEUDO_FORK"),
            InvalidInputError("bad", field="task"),
            InvalidInputError("bad"),
            RateLimitedError("slow down", retry_after_s=1.5),
            RuntimeError("a bug"),
        )
    ]
    assert kinds == [
        ["ErrorInfo", "RequestInfo"],
        ["BadRequest", "RequestInfo"],
        ["RequestInfo"],
        ["RequestInfo", "RetryInfo"],
        ["RequestInfo"],
    ]
    [*_, retry] = error_details(RateLimitedError("slow down", retry_after_s=1.5), "rid")
    assert retry.retry_delay.ToNanoseconds() == 1_500_000_000  # type: ignore[attr-defined]


class _Failed(grpc.RpcError, grpc.Call):  # type: ignore[misc]  # what a failed call raises
    def __init__(self, code: grpc.StatusCode, details: str, trailers: Any) -> None:
        self._code, self._details, self._trailers = code, details, trailers

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:
        return self._trailers

    def initial_metadata(self) -> Any:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float | None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False


def test_the_client_reads_only_the_standard_details() -> None:
    """The old trailers alone (a certd before this release) make no refusal; details whose
    message differs from the status are not trusted."""
    legacy = _Failed(
        grpc.StatusCode.FAILED_PRECONDITION, "refused", (("certd-refusal-reason", "PSEUDO_FORK"),)
    )
    assert isinstance(map_rpc_error(legacy), ServerError)
    status = rpc_status.to_status(_status("another message", "PSEUDO_FORK"))
    forged = _Failed(grpc.StatusCode.FAILED_PRECONDITION, "refused", status.trailing_metadata)
    assert isinstance(map_rpc_error(forged), ServerError)
    status = rpc_status.to_status(_status("refused", "PSEUDO_FORK"))
    good = _Failed(grpc.StatusCode.FAILED_PRECONDITION, "refused", status.trailing_metadata)
    error = map_rpc_error(good)
    assert isinstance(error, CertificationRefusedError) and error.reason == "PSEUDO_FORK"


def _status(message: str, reason: str) -> Any:
    from google.rpc import status_pb2

    status = status_pb2.Status(code=grpc.StatusCode.FAILED_PRECONDITION.value[0], message=message)
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN))
    return status
