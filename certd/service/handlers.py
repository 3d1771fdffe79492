"""Rebuild a gRPC method handler around wrapped behaviours (what every interceptor here does).

Example (``ErrorInterceptor`` in ``certd.service.interceptors``)::

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None:
            return None
        return rewrap(
            handler,
            lambda fn, _streamed: _wrap_unary(fn, details.method),
            lambda fn, _streamed: _wrap_stream(fn, details.method),
        )

A handler has one behaviour of four kinds. Unary-response kinds (unary-unary, stream-unary) get
the ``unary`` wrapper, streaming-response kinds (unary-stream, stream-stream) the ``stream``
wrapper, which must return a generator function. Each wrapper is told whether the request is a
stream (the request argument is then an iterator, not a message).

A non-blocking behaviour (``experimental_non_blocking``, e.g. grpc's ``Health.Watch``, which
holds no thread while it waits) is returned as it is: wrapping it would make it block a
serving thread per watcher. Such a behaviour guards itself (see ``certd.service.health``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc

from certd.authority.jobs import Job
from certd.service.requestid import current_request_id

__all__ = ["Behaviour", "Wrap", "bind_principal", "rewrap", "rpc_job"]

Behaviour = Callable[[Any, grpc.ServicerContext], Any]
# (behaviour, request is a stream) -> the wrapped behaviour
Wrap = Callable[[Behaviour, bool], Behaviour]


def rewrap(
    handler: grpc.RpcMethodHandler[Any, Any], unary: Wrap, stream: Wrap
) -> grpc.RpcMethodHandler[Any, Any]:
    """The same handler (serializers included) with its behaviour wrapped."""
    behaviour = handler.unary_stream or handler.stream_stream
    if getattr(behaviour, "experimental_non_blocking", False):
        return handler
    ser = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary, False), **ser)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(stream(handler.unary_stream, False), **ser)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(unary(handler.stream_unary, True), **ser)
    if handler.stream_stream:
        return grpc.stream_stream_rpc_method_handler(stream(handler.stream_stream, True), **ser)
    return handler


_serving = threading.local()  # the admitted call's principal, per serving thread


def bind_principal(principal: str) -> None:
    """The principal of the call this serving thread runs ('' unbinds); set by admission."""
    _serving.principal = principal


def rpc_job(context: grpc.ServicerContext) -> Job:
    """The RPC's job: keyed by its request id and principal, cancelled when the RPC ends early.

    The checks it schedules share pools fairly with other RPCs' and stop when the client
    cancels, its deadline passes or the server ends it (see ``certd.authority.jobs``); the
    pools keep a worker free for other principals (``sandboxes.fair``).
    """
    job = Job.new(current_request_id(), principal=getattr(_serving, "principal", ""))
    if not context.add_callback(job.cancel.cancel):
        job.cancel.cancel()  # the RPC has already ended
    return job
