"""One interceptor maps certd's typed errors to gRPC status codes and standard error details.

No traceback reaches the caller: an unexpected exception becomes INTERNAL with a request id,
and the traceback goes to the server log under that id. The details are ``google.rpc.Status``
details (``grpc-status-details-bin``, AIP-193), read with ``grpc_status.rpc_status.from_call``:

- ``RequestInfo`` with the request id, on every error;
- ``ErrorInfo`` (domain ``certd``, reason the refusal code) on a refusal (FAILED_PRECONDITION);
- ``BadRequest`` with one field violation naming the field at fault on INVALID_ARGUMENT or
  RESOURCE_EXHAUSTED, when the error names a field;
- ``RetryInfo`` with the wait on a rate limit.

For one release the same facts also go in the trailers older clients read
(``certd-request-id``, ``certd-error-type``, ``certd-error-field``, ``certd-refusal-reason``).
An error leaves as a trailers-only response (no headers first), so a client's gRPC may retry it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from certd.errors import (
    AuthenticationError,
    CertdError,
    CertificationRefusedError,
    ConfigError,
    InProgressError,
    InvalidInputError,
    LimitExceededError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    StoreError,
    UnsupportedError,
    WarmingUpError,
)
from certd.service.handlers import rewrap
from certd.service.requestid import current_request_id

__all__ = ["ERROR_DOMAIN", "ErrorInterceptor", "error_details", "status_for"]

log = logging.getLogger("certd.service")

ERROR_DOMAIN = "certd"
"""``ErrorInfo.domain`` of certd's refusals."""

_CODES: tuple[tuple[type[CertdError], grpc.StatusCode], ...] = (
    (LimitExceededError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (InvalidInputError, grpc.StatusCode.INVALID_ARGUMENT),
    (CertificationRefusedError, grpc.StatusCode.FAILED_PRECONDITION),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (UnsupportedError, grpc.StatusCode.UNIMPLEMENTED),
    (StoreError, grpc.StatusCode.UNAVAILABLE),
    (WarmingUpError, grpc.StatusCode.UNAVAILABLE),
    (ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
    (InProgressError, grpc.StatusCode.ABORTED),
    (AuthenticationError, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
)


def status_for(error: CertdError) -> grpc.StatusCode:
    """The gRPC status code of a certd error (INTERNAL when nothing more specific)."""
    for cls, code in _CODES:
        if isinstance(error, cls):
            return code
    return grpc.StatusCode.INTERNAL


def error_details(error: BaseException, request_id: str) -> list[Message]:
    """The ``google.rpc.Status`` details of an error (see the module docstring)."""
    details: list[Message] = [error_details_pb2.RequestInfo(request_id=request_id)]
    if isinstance(error, CertificationRefusedError):
        details.append(error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN))
    if isinstance(error, InvalidInputError) and error.field:
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=error.field, description=str(error)
        )
        details.append(error_details_pb2.BadRequest(field_violations=[violation]))
    if isinstance(error, RateLimitedError):
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromNanoseconds(int(error.retry_after_s * 1e9))
        details.append(retry)
    return details


def _legacy_trailers(error: CertdError) -> list[tuple[str, str]]:
    # What clients before the standard details read; kept for one release (docs/wire-api.md).
    meta = [("certd-error-type", type(error).__name__)]
    if isinstance(error, InvalidInputError) and error.field:
        meta.append(("certd-error-field", error.field))
    if isinstance(error, CertificationRefusedError):
        meta.append(("certd-refusal-reason", error.reason))
    return meta


def _abort(context: grpc.ServicerContext, error: BaseException, method: str) -> None:
    request_id = current_request_id() or uuid.uuid4().hex[:16]
    meta: list[tuple[str, str]] = [("certd-request-id", request_id)]
    if isinstance(error, CertdError):
        code = status_for(error)
        meta += _legacy_trailers(error)
        message = str(error)
        log.info("%s %s: %s [%s]", method, code.name, message, request_id)
    else:
        code = grpc.StatusCode.INTERNAL
        message = f"internal error (request id {request_id})"
        log.error("%s failed [%s]", method, request_id, exc_info=error)
    status = status_pb2.Status(code=code.value[0], message=message)
    for detail in error_details(error, request_id):
        status.details.add().Pack(detail)
    rich = rpc_status.to_status(status)
    context.set_trailing_metadata((*meta, *rich.trailing_metadata))
    context.abort(rich.code, rich.details)


def _wrap_unary(
    fn: Callable[[Any, grpc.ServicerContext], Any], method: str
) -> Callable[[Any, grpc.ServicerContext], Any]:
    def call(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return fn(request, context)
        except Exception as e:
            if _aborted(context):
                raise
            _abort(context, e, method)
            raise  # unreachable: abort raises

    return call


def _wrap_stream(
    fn: Callable[[Any, grpc.ServicerContext], Iterator[Any]], method: str
) -> Callable[[Any, grpc.ServicerContext], Iterator[Any]]:
    def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        try:
            yield from fn(request, context)
        except Exception as e:
            if _aborted(context):
                raise
            _abort(context, e, method)
            raise

    return call


def _aborted(context: grpc.ServicerContext) -> bool:
    # context.abort raises a plain Exception after setting the code; let it through.
    return context.code() is not None  # type: ignore[attr-defined]  # present at runtime


class ErrorInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]  # generic only in stubs
    """Maps certd errors to status codes for every RPC of the server."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        return rewrap(
            handler,
            lambda fn, _streamed: _wrap_unary(fn, method),
            lambda fn, _streamed: _wrap_stream(fn, method),
        )
