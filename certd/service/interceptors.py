"""One interceptor maps certd's typed errors to gRPC status codes.

No traceback reaches the caller: an unexpected exception becomes INTERNAL with a request id,
and the traceback goes to the server log under that id. Trailing metadata carries the error's
type (``certd-error-type``), the field at fault (``certd-error-field``) and, for refusals, the
reason code (``certd-refusal-reason``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc

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
    StoreError,
    UnsupportedError,
    WarmingUpError,
)
from certd.service.handlers import rewrap
from certd.service.observability import current_request_id

__all__ = ["ErrorInterceptor", "status_for"]

log = logging.getLogger("certd.service")

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


def _abort(context: grpc.ServicerContext, error: BaseException, method: str) -> None:
    request_id = current_request_id() or uuid.uuid4().hex[:16]
    meta: list[tuple[str, str]] = [("certd-request-id", request_id)]
    if isinstance(error, CertdError):
        code = status_for(error)
        meta.append(("certd-error-type", type(error).__name__))
        if isinstance(error, InvalidInputError) and error.field:
            meta.append(("certd-error-field", error.field))
        if isinstance(error, CertificationRefusedError):
            meta.append(("certd-refusal-reason", error.reason))
        message = str(error)
        log.info("%s %s: %s [%s]", method, code.name, message, request_id)
    else:
        code = grpc.StatusCode.INTERNAL
        message = f"internal error (request id {request_id})"
        log.error("%s failed [%s]", method, request_id, exc_info=error)
    context.set_trailing_metadata(tuple(meta))
    context.abort(code, message)


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
