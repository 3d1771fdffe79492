"""Admission: bounded RPCs in flight, per-client shares, and idle streams ended.

Example (what ``CertdServer`` does)::

    admission = Admission(cfg.limits)
    server = grpc.server(ThreadPoolExecutor(cfg.limits.max_workers),
                         interceptors=[..., AdmissionInterceptor(admission)])
    admission.start()   # the idle-stream reaper
    ...
    admission.stop()

Every RPC except ``grpc.health.v1.Health`` takes a slot when its handler starts and frees it
when it ends. Beyond ``max_concurrent_rpcs`` slots in all, or ``max_rpcs_per_client`` for one
client (its principal, else its peer host), the call ends at once with RESOURCE_EXHAUSTED. The
serving pool has ``max_workers`` ≥ ``max_concurrent_rpcs + 2`` threads, so admitted calls can
never take the last threads: health checks and refusals always find one. Health is not
counted: Check is a lookup, and Watch holds no thread (``guarded_health`` bounds it).

A stream that waits on its client — for the next request message, or for the client to read
a reply — for ``stream_idle_timeout_s`` is ended with DEADLINE_EXCEEDED by a reaper thread;
that also cancels the stream's running checks (``certd.authority.jobs``).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from certd.config import ServiceLimits
from certd.errors import ServerBusyError
from certd.service.access import client_of
from certd.service.handlers import Behaviour, rewrap

__all__ = ["Admission", "AdmissionInterceptor", "UNCOUNTED"]

log = logging.getLogger("certd.service")

UNCOUNTED = ("/grpc.health.v1.Health/",)
"""Method prefixes that take no slot."""


class _Stream:
    """One admitted stream's idle clock: ``since`` is set while it waits on its client."""

    __slots__ = ("context", "reaped", "since")

    def __init__(self, context: grpc.ServicerContext) -> None:
        self.context = context
        self.since: float | None = None
        self.reaped = False


class _WatchedRequests:
    """A request iterator whose waits for the client start the stream's idle clock."""

    def __init__(self, it: Iterator[Any], stream: _Stream) -> None:
        self._it = it
        self._stream = stream

    def __iter__(self) -> _WatchedRequests:
        return self

    def __next__(self) -> Any:
        self._stream.since = time.monotonic()
        try:
            return next(self._it)
        finally:
            self._stream.since = None


class Admission:
    """The server's RPC slots and the idle-stream reaper.

    Args:
        limits: ``max_concurrent_rpcs``, ``max_rpcs_per_client``, ``stream_idle_timeout_s``.
    """

    def __init__(self, limits: ServiceLimits) -> None:
        self._limits = limits
        self._lock = threading.Lock()
        self._in_flight = 0
        self._per_client: dict[str, int] = {}
        self._streams: set[_Stream] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refused = 0
        self.reaped = 0

    def enter(self, client: str) -> Callable[[], None]:
        """Take a slot for ``client``.

        Returns:
            The function that frees it (call it once).

        Raises:
            ServerBusyError: the server or the client is at its bound.
        """
        lim = self._limits
        with self._lock:
            mine = self._per_client.get(client, 0)
            if self._in_flight >= lim.max_concurrent_rpcs or mine >= lim.max_rpcs_per_client:
                self.refused += 1
                if mine >= lim.max_rpcs_per_client:
                    why = f"this client has {mine} RPCs in flight (max_rpcs_per_client)"
                else:
                    why = f"the server has {self._in_flight} RPCs in flight (max_concurrent_rpcs)"
                raise ServerBusyError(f"{why}; retry later")
            self._in_flight += 1
            self._per_client[client] = mine + 1

        def leave() -> None:
            with self._lock:
                self._in_flight -= 1
                left = self._per_client[client] - 1
                if left:
                    self._per_client[client] = left
                else:
                    del self._per_client[client]

        return leave

    @property
    def in_flight(self) -> int:
        """RPCs holding a slot now."""
        return self._in_flight

    def watch(self, context: grpc.ServicerContext) -> _Stream:
        """Start tracking a stream's idle time."""
        stream = _Stream(context)
        with self._lock:
            self._streams.add(stream)
        return stream

    def forget(self, stream: _Stream) -> None:
        """Stop tracking a stream."""
        with self._lock:
            self._streams.discard(stream)

    def reap(self, now: float | None = None) -> int:
        """End every stream idle past the limit; return how many were ended."""
        now = time.monotonic() if now is None else now
        limit = self._limits.stream_idle_timeout_s
        with self._lock:
            idle = [s for s in self._streams if s.since is not None and now - s.since > limit]
            for s in idle:
                self._streams.discard(s)
                s.reaped = True
        for s in idle:
            _end_idle(s.context, f"stream idle for more than {limit:g} s; ended by the server")
        self.reaped += len(idle)
        return len(idle)

    def start(self) -> None:
        """Start the reaper thread."""
        period = min(1.0, self._limits.stream_idle_timeout_s / 4)

        def run() -> None:
            while not self._stop.wait(period):
                self.reap()

        self._thread = threading.Thread(target=run, name="certd-idle-reaper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the reaper thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _end_idle(context: grpc.ServicerContext, why: str) -> None:
    """Cancel a call from outside its handler thread, with DEADLINE_EXCEEDED when possible."""
    # The sync server's context cancels only with CANCELLED; its core call can carry a status
    # (private API, checked here and replaced by a plain cancel when it is not there).
    call: Any = getattr(getattr(context, "_rpc_event", None), "call", None)
    try:
        cygrpc: Any = importlib.import_module("grpc._cython.cygrpc")
        if call is not None:
            call.cancel(cygrpc.StatusCode.deadline_exceeded, why)
            return
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        log.warning("idle stream: status-carrying cancel failed (%s); cancelling plainly", e)
    context.cancel()  # type: ignore[no-untyped-call]  # untyped in the stubs


class AdmissionInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]  # generic in stubs
    """Takes a slot for every counted RPC and watches the idle time of streams."""

    def __init__(
        self,
        admission: Admission,
        client: Callable[[grpc.ServicerContext], str] = client_of,
    ) -> None:
        self._admission = admission
        self._client = client

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(UNCOUNTED):
            return handler
        admission = self._admission

        def unary(fn: Behaviour, streamed: bool) -> Behaviour:
            def call(request: Any, context: grpc.ServicerContext) -> Any:
                leave = admission.enter(self._client(context))
                stream = admission.watch(context) if streamed else None
                try:
                    if stream is not None:
                        request = _WatchedRequests(request, stream)
                    return fn(request, context)
                except grpc.RpcError:
                    if stream is not None and stream.reaped:
                        return None  # the reaper has ended the call with its status
                    raise
                finally:
                    if stream is not None:
                        admission.forget(stream)
                    leave()

            return call

        def stream(fn: Behaviour, streamed: bool) -> Behaviour:
            def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                leave = admission.enter(self._client(context))
                watched = admission.watch(context)
                try:
                    if streamed:
                        request = _WatchedRequests(request, watched)
                    for reply in fn(request, context):
                        watched.since = time.monotonic()  # until the client takes the reply
                        yield reply
                        watched.since = None
                except grpc.RpcError:
                    if not watched.reaped:
                        raise  # else the reaper has ended the call with its status
                finally:
                    admission.forget(watched)
                    leave()

            return call

        return rewrap(handler, unary, stream)
