"""Admission: RPCs in flight bounded before they take a thread, idle streams ended.

Example (what ``CertdServer`` does)::

    admission = Admission(cfg.limits)
    executor = AdmissionExecutor(admission, cfg.limits.max_workers, authenticate=None)
    server = grpc.server(executor, interceptors=[..., AdmissionInterceptor(admission)])
    admission.start()   # the idle reaper
    ...
    admission.stop()

The sync gRPC server hands every call to its thread pool as soon as the call's headers
arrive; a unary call then waits *in that thread* for its request message. So admission happens
where the call is handed over, in ``AdmissionExecutor.submit``, before any serving thread is
taken: the caller is identified (authenticated first when access control is on, so an
unauthenticated call is refused there with UNAUTHENTICATED and holds nothing), and beyond
the RPC threads (``max_workers - max_health_in_flight``) in all, or half of them for that
principal, the call ends at once with RESOURCE_EXHAUSTED. The principal is the bearer token's
when access control is on, else the peer's identity (``certd.service.peers``: on loopback the
user that owns the client's socket, so many connections and many processes of one user are one
principal and two users are two — ``limits.local_principal: process`` makes it the process
instead; a remote peer is its host).

A call takes a *verification slot* only once its first request message has arrived
(``Admission.promote``, run by ``AdmissionInterceptor``): at most ``max_concurrent_rpcs`` in
all and ``per_principal(limits)`` (never more than half) per principal; past either bound the
call ends then with RESOURCE_EXHAUSTED. A call that has not sent its first message holds a
thread (the sync server's price) but no verification slot, and is cut at
``first_message_timeout_s``; since one principal holds at most half the threads, idle and busy
calls together cannot lock another principal out. The pool has ``max_workers`` ≥
``max_concurrent_rpcs + max_health_in_flight`` threads, so admitted calls never take the threads
kept for health; a refusal takes no thread at all. Health calls (``grpc.health.v1.Health``)
count apart: at most ``max_health_in_flight`` at once (half per client), each ended if its
request has not arrived within ``health_idle_timeout_s``. A Watch frees its slot as soon as it
has its request: it then holds no thread (``certd.service.health`` bounds open watches).

A call whose first request message has not arrived within ``first_message_timeout_s`` (a few
seconds), or that later waits on its client for ``stream_idle_timeout_s`` — for the next
message of a stream, or for the client to read a reply — is ended with
DEADLINE_EXCEEDED by the reaper thread; ending it cancels its running checks too
(``certd.authority.jobs``). ``AdmissionInterceptor`` stops the clock while the handler works.

The executor reads the call from the arguments grpc submits (``fn(behaviour_runner,
rpc_event, …)``), a private convention of ``grpc._server``; a call it does not recognise is
run unadmitted and logged, and ``tests/integration/test_hostile_clients.py`` fails if grpc
changes it.
"""

from __future__ import annotations

import contextvars
import importlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import grpc

from certd.config import ServiceLimits
from certd.errors import AuthenticationError, ServerBusyError
from certd.service.handlers import Behaviour, bind_principal, rewrap
from certd.service.peers import principal_of_peer

__all__ = ["Admission", "AdmissionExecutor", "AdmissionInterceptor", "HEALTH", "per_principal"]

log = logging.getLogger("certd.service")

HEALTH = "/grpc.health.v1.Health/"
"""Health calls: counted apart, in the threads kept for them."""

_cygrpc: Any = importlib.import_module("grpc._cython.cygrpc")  # status-carrying cancel

# Set by AdmissionInterceptor.intercept_service, which grpc runs in the call's own context
# (``_RPCState.context``) as the call arrives; the executor reads it from that context.
_method: contextvars.ContextVar[str] = contextvars.ContextVar("certd_method", default="")


def per_principal(limits: ServiceLimits) -> int:
    """The RPCs one principal may have in flight: ``max_rpcs_per_client``, at most half."""
    return max(1, min(limits.max_rpcs_per_client, limits.max_concurrent_rpcs // 2))


def _threads(limits: ServiceLimits) -> tuple[int, int]:
    """The threads for RPCs other than health, and one principal's half of them."""
    total = max(1, limits.max_workers - limits.max_health_in_flight)
    return total, max(1, total // 2)


class _Ticket:
    """One admitted call: its client, its core call, and its idle clock.

    ``since`` is the time the call started waiting on its client, None while the handler
    works; ``started`` is set once the first request message has arrived (until then the
    idle limit is ``first_message_timeout_s``); ``counted`` once it holds a verification slot;
    ``reaped`` is set when the reaper (or a refused promotion) ended it.
    """

    __slots__ = ("call", "client", "counted", "health", "reaped", "since", "started")

    def __init__(self, client: str, call: Any, health: bool) -> None:
        self.client = client
        self.call = call
        self.health = health
        self.since: float | None = time.monotonic()  # waiting for the request message
        self.started = False
        self.counted = False
        self.reaped = False


class _WatchedRequests:
    """A request iterator whose waits for the client start the call's idle clock."""

    def __init__(self, it: Iterator[Any], ticket: _Ticket, admission: Admission) -> None:
        self._it = it
        self._ticket = ticket
        self._admission = admission

    def __iter__(self) -> _WatchedRequests:
        return self

    def __next__(self) -> Any:
        self._ticket.since = time.monotonic()
        try:
            item = next(self._it)
        finally:
            self._ticket.since = None
        if not self._ticket.started:
            self._ticket.started = True
            try:
                self._admission.promote(self._ticket)
            except ServerBusyError as e:
                self._ticket.reaped = True  # ended here with its status
                end_call(self._ticket.call, grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
                raise StopIteration from None
        return item


def end_call(call: Any, code: grpc.StatusCode, why: str) -> None:
    """End a core call now with a status (from any thread)."""
    status = getattr(_cygrpc.StatusCode, code.name.lower())
    call.cancel(status, why)


class Admission:
    """The server's RPC slots and the idle reaper.

    Args:
        limits: ``max_concurrent_rpcs``, ``max_rpcs_per_client``, ``first_message_timeout_s``,
            ``stream_idle_timeout_s``.
    """

    def __init__(self, limits: ServiceLimits) -> None:
        self._limits = limits
        self.local_principal = limits.local_principal  # the loopback rule (certd.service.peers)
        # the bound port and, for a listen on one address, that address: loopback callers are
        # found by their connection's four-tuple (certd.service.peers)
        self.server_port: int | None = None
        self.server_host: str | None = None
        self._lock = threading.Lock()
        self._per_client: dict[str, int] = {}  # calls held (threads), pending or started
        self._verifying: dict[str, int] = {}  # verification slots held
        self._by_thread: dict[int, _Ticket] = {}
        self._tickets: set[_Ticket] = set()
        self._health = 0  # health tickets among them
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refused = 0
        self.reaped = 0

    def enter(self, client: str, call: Any, *, health: bool = False) -> _Ticket:
        """Take a slot for ``client``'s ``call`` (a health slot for a health call).

        Raises:
            ServerBusyError: the server or the client is at its bound.
        """
        lim = self._limits
        if health:  # a client holds at most half the health slots
            total, each = lim.max_health_in_flight, max(1, lim.max_health_in_flight // 2)
            what, limits = "health calls", "max_health_in_flight"
        else:
            total, each = _threads(lim)
            what, limits = "RPCs", "max_workers - max_health_in_flight"
        key = ("health:" if health else "") + client
        with self._lock:
            mine = self._per_client.get(key, 0)
            count = self._health if health else len(self._tickets) - self._health
            if not health:
                self._check_slots(key)
            if mine >= each or count >= total:
                self.refused += 1
                who = f"this principal has {mine}" if mine >= each else f"the server has {count}"
                raise ServerBusyError(f"{who} {what} in flight ({limits}); retry later")
            ticket = _Ticket(key, call, health)
            self._tickets.add(ticket)
            self._health += health
            self._per_client[key] = mine + 1
            return ticket

    def _check_slots(self, key: str) -> None:
        """Raise ServerBusyError when ``key`` or the server has no verification slot free."""
        lim = self._limits
        mine, each = self._verifying.get(key, 0), per_principal(lim)
        count = sum(self._verifying.values())
        if mine >= each or count >= lim.max_concurrent_rpcs:
            self.refused += 1
            who = f"this principal has {mine}" if mine >= each else f"the server has {count}"
            raise ServerBusyError(
                f"{who} RPCs verifying (max_concurrent_rpcs, max_rpcs_per_client); retry later"
            )

    def promote(self, ticket: _Ticket) -> None:
        """Give ``ticket`` a verification slot: its first request message has arrived.

        Raises:
            ServerBusyError: its principal or the server has every verification slot taken.
        """
        if ticket.health or ticket.counted:
            return
        with self._lock:
            if ticket not in self._tickets:
                return
            self._check_slots(ticket.client)
            ticket.counted = True
            self._verifying[ticket.client] = self._verifying.get(ticket.client, 0) + 1

    def leave(self, ticket: _Ticket) -> None:
        """Free a ticket's slot (once)."""
        with self._lock:
            if ticket not in self._tickets:
                return
            self._tickets.discard(ticket)
            if ticket.counted:
                left_v = self._verifying[ticket.client] - 1
                if left_v:
                    self._verifying[ticket.client] = left_v
                else:
                    del self._verifying[ticket.client]
            self._health -= ticket.health
            left = self._per_client[ticket.client] - 1
            if left:
                self._per_client[ticket.client] = left
            else:
                del self._per_client[ticket.client]

    def bind(self, ticket: _Ticket | None) -> None:
        """Make ``ticket`` the one of the calling (serving) thread; None unbinds."""
        with self._lock:
            if ticket is None:
                self._by_thread.pop(threading.get_ident(), None)
            else:
                self._by_thread[threading.get_ident()] = ticket

    def current(self) -> _Ticket | None:
        """The ticket of the call this serving thread runs, if admitted here."""
        return self._by_thread.get(threading.get_ident())

    @property
    def in_flight(self) -> int:
        """Calls other than health holding a thread now (pending or verifying)."""
        return len(self._tickets) - self._health

    @property
    def verifying(self) -> int:
        """Calls holding a verification slot (their first message has arrived)."""
        with self._lock:
            return sum(self._verifying.values())

    def reap(self, now: float | None = None) -> int:
        """End every call idle past the limit; return how many were ended."""
        now = time.monotonic() if now is None else now
        lim = self._limits

        def limit(t: _Ticket) -> float:
            if t.health:
                return lim.health_idle_timeout_s
            return lim.stream_idle_timeout_s if t.started else lim.first_message_timeout_s

        with self._lock:
            idle = [
                t
                for t in self._tickets
                if not t.reaped and t.since is not None and now - t.since > limit(t)
            ]
            for t in idle:
                t.reaped = True
        for t in idle:
            what = "waiting on the client" if t.started else "waiting for the first message"
            why = f"idle for more than {limit(t):g} s {what}; ended by the server"
            try:
                end_call(t.call, grpc.StatusCode.DEADLINE_EXCEEDED, why)
            except (ValueError, RuntimeError, AttributeError) as e:  # it ended meanwhile
                log.info("idle call already ended: %s", e)
        self.reaped += len(idle)
        return len(idle)

    def start(self) -> None:
        """Start the reaper thread."""
        lim = self._limits
        period = min(
            1.0,
            lim.stream_idle_timeout_s / 4,
            lim.first_message_timeout_s / 4,
            lim.health_idle_timeout_s / 4,
        )

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


class _CallView:
    """The parts of a servicer context that authentication reads, from a core call event."""

    def __init__(self, event: Any) -> None:
        self._event = event

    def invocation_metadata(self) -> Any:
        return self._event.invocation_metadata

    def auth_context(self) -> dict[str, Any]:
        auth = _cygrpc.auth_context(self._event.call) or {}
        return {(k.decode() if isinstance(k, bytes) else k): v for k, v in auth.items()}

    def peer(self) -> str:
        peer = self._event.call.peer()
        return peer.decode() if isinstance(peer, bytes) else str(peer)


def _peer_host(peer: str) -> str:  # health: one key per host
    # ipv4:127.0.0.1:5555, ipv6:[::1]:5555, unix:...
    return peer.rsplit(":", 1)[0] if peer.startswith(("ipv4:", "ipv6:")) else peer


class AdmissionExecutor(ThreadPoolExecutor):
    """The serving thread pool, admitting each call before it takes a thread.

    Args:
        admission: the slots.
        max_workers: serving threads.
        authenticate: the principal of a call (raises ``AuthenticationError``); None when
            access control is off (the principal is then the peer's identity,
            ``certd.service.peers.principal_of_peer``).
    """

    def __init__(
        self,
        admission: Admission,
        max_workers: int,
        authenticate: Callable[[Any], Any] | None = None,
    ) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="certd-rpc")
        self._admission = admission
        self._authenticate = authenticate
        self._warned = False

    def _client(self, view: _CallView) -> str:
        if self._authenticate is None:
            admission = self._admission
            return principal_of_peer(
                view.peer(), admission.local_principal, admission.server_port, admission.server_host
            )
        return f"principal:{self._authenticate(view).name}"

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Admit the call grpc hands over, then run it; refuse it without taking a thread."""
        # grpc._server submits (context.run, behaviour runner, rpc_event, rpc_state, ...)
        event: Any = args[1] if len(args) > 2 else None
        context = getattr(args[2], "context", None) if len(args) > 2 else None
        if not hasattr(event, "call") or not isinstance(context, contextvars.Context):
            if not self._warned:
                self._warned = True
                log.warning("admission: a call grpc submitted was not recognised; not counted")
            return super().submit(fn, *args, **kwargs)
        method = context.get(_method, "")
        health = method.startswith(HEALTH)  # open (Check) or guarded by itself (Watch)
        view = _CallView(event)
        try:
            client = f"peer:{_peer_host(view.peer())}" if health else self._client(view)
            ticket = self._admission.enter(client, event.call, health=health)
        except AuthenticationError as e:
            end_call(event.call, grpc.StatusCode.UNAUTHENTICATED, str(e))
            return _done()
        except ServerBusyError as e:
            log.info("%s RESOURCE_EXHAUSTED: %s", method, e)
            end_call(event.call, grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
            return _done()
        admission = self._admission

        def run() -> Any:
            admission.bind(ticket)
            bind_principal(ticket.client)
            try:
                return fn(*args, **kwargs)
            finally:
                bind_principal("")
                admission.bind(None)
                admission.leave(ticket)

        try:
            return super().submit(run)
        except RuntimeError:  # shutting down
            admission.leave(ticket)
            raise


def _done() -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(None)
    return future


def _first_message(admission: Admission, ticket: _Ticket, context: grpc.ServicerContext) -> None:
    """A unary request has arrived: the call takes its verification slot or ends."""
    ticket.started = True
    try:
        admission.promote(ticket)
    except ServerBusyError as e:
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))


class AdmissionInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]  # generic in stubs
    """Stops a call's idle clock while its handler works, restarts it while it waits."""

    def __init__(self, admission: Admission) -> None:
        self._admission = admission

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        _method.set(handler_call_details.method)  # for AdmissionExecutor.submit
        handler = continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(HEALTH):
            return handler
        admission = self._admission

        def unary(fn: Behaviour, streamed: bool) -> Behaviour:
            def call(request: Any, context: grpc.ServicerContext) -> Any:
                ticket = admission.current()
                if ticket is None:
                    return fn(request, context)
                ticket.since = None  # the request is here; the handler works
                if streamed:
                    request = _WatchedRequests(request, ticket, admission)
                else:
                    _first_message(admission, ticket, context)
                try:
                    return fn(request, context)
                except grpc.RpcError:
                    if ticket.reaped:
                        return None  # the reaper has ended the call with its status
                    raise

            return call

        def stream(fn: Behaviour, streamed: bool) -> Behaviour:
            def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                ticket = admission.current()
                if ticket is None:
                    yield from fn(request, context)
                    return
                ticket.since = None
                if streamed:
                    request = _WatchedRequests(request, ticket, admission)
                else:
                    _first_message(admission, ticket, context)
                try:
                    for reply in fn(request, context):
                        ticket.since = time.monotonic()  # until the client takes the reply
                        yield reply
                        ticket.since = None
                except grpc.RpcError:
                    if not ticket.reaped:
                        raise  # else the reaper has ended the call with its status

            return call

        return rewrap(handler, unary, stream)
