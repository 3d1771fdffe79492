"""Cluster-wide request handling kept in Redis: idempotency keys and per-client rate limits.

Example (what a retrying client sends)::

    stub.CertifyBatch(request, metadata=[("idempotency-key", "run-7/batch-0012")])

Idempotency: a unary request that carries ``idempotency-key`` metadata is run once per
(client, method, key) across every replica. The first replica to claim the key runs it and
stores the serialized reply for ``idempotency_ttl_s``; a retry (to any replica) gets the
stored reply; a retry while the first is still running waits up to ``idempotency_wait_s``,
then gets ABORTED (retry later). A key reused with a different request is refused
(INVALID_ARGUMENT). A request that fails is not stored: its retry runs again. The running
replica renews its claim every third of ``idempotency_claim_s``; the claim of a replica that
died expires after ``idempotency_claim_s`` and a retry then runs the request (a Certify twice
yields the same certificate: the ledger key of (task, κ, label) is unique).

Rate limits: a token bucket per client in Redis (``rate_limit_per_s`` tokens a second, at
most ``rate_limit_burst``), one token per request message — a unary call takes one, a
streaming call (``VerifyStream``) one per item it sends, as each arrives — refilled by Redis's
own clock so replicas agree. Over the limit: RESOURCE_EXHAUSTED, the message saying when to
retry (a stream ends there; the verdicts it already received stand).

The client is the authenticated principal (``certd.service.access``) when access control is
on, else the peer's address without its port.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import grpc
import redis
from redis.exceptions import RedisError

from certd.config import ClusterConfig
from certd.errors import (
    ConfigError,
    InProgressError,
    InvalidInputError,
    RateLimitedError,
    StoreError,
)
from certd.service.access import client_of
from certd.service.handlers import Behaviour, rewrap

__all__ = ["ClusterInterceptor", "ClusterState", "RequestState", "client_of"]

log = logging.getLogger("certd.cluster")

IDEMPOTENCY_HEADER = "idempotency-key"
_MAX_KEY_CHARS = 256

_CLAIM = """
local got = redis.call('HMGET', KEYS[1], 'state', 'req', 'resp')
if not got[1] then
  redis.call('HSET', KEYS[1], 'state', 'pending', 'req', ARGV[1], 'owner', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {'NEW'}
end
return {got[1], got[2], got[3] or ''}
"""

_FINISH = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'state', 'done', 'resp', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
"""

_TAKE = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local got = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(got[1]) or burst
local ts = tonumber(got[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
local ok = 0
local wait_ms = 0
if tokens >= 1 then
  tokens = tokens - 1
  ok = 1
else
  wait_ms = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {ok, wait_ms}
"""


class RequestState(Protocol):
    """The shared request state the interceptor reads and writes (Redis or PostgreSQL)."""

    def take(self, client: str, rate_per_s: float, burst: int) -> int | None: ...

    def record(self, client: str, method: str, key: str) -> str: ...

    def claim(
        self, record: str, digest: str, owner: str, claim_ms: int
    ) -> tuple[str, str, bytes]: ...

    def renew(self, record: str, claim_ms: int) -> None: ...

    def settle(self, record: str, owner: str, reply: bytes, ttl_ms: int) -> None: ...


class ClusterState:
    """The cluster's shared request state in Redis: rate buckets and idempotency records.

    The interceptor's only I/O goes through these four calls; each raises ``StoreError`` when
    Redis fails.
    """

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        """Set up.

        Args:
            client: a Redis client of its own (not the ledger store's).
            prefix: the hash-tagged key prefix, e.g. ``{certd}``.
        """
        self._r = client
        self._prefix = prefix
        self._claim = client.register_script(_CLAIM)
        self._finish = client.register_script(_FINISH)
        self._take = client.register_script(_TAKE)

    def take(self, client: str, rate_per_s: float, burst: int) -> int | None:
        """Take one token from ``client``'s bucket; None when taken, else the ms until one is."""
        bucket = f"{self._prefix}:rate:{hashlib.sha256(client.encode()).hexdigest()[:32]}"
        try:
            ok, wait_ms = self._take(keys=[bucket], args=[rate_per_s, burst])
        except RedisError as e:
            raise StoreError(f"rate limiter: {e}") from e
        return None if int(ok) else int(wait_ms)

    def record(self, client: str, method: str, key: str) -> str:
        """The idempotency record of (client, method, key)."""
        name = hashlib.sha256(f"{client}\n{method}\n{key}".encode()).hexdigest()
        return f"{self._prefix}:idem:{name}"

    def claim(self, record: str, digest: str, owner: str, claim_ms: int) -> tuple[str, str, bytes]:
        """Claim ``record`` for ``owner`` unless it exists.

        Returns:
            ``("NEW", "", b"")`` when claimed, else the record's state (``pending`` or
            ``done``), the digest of its request and its stored reply.
        """
        try:
            got = self._claim(keys=[record], args=[digest, owner, claim_ms])
        except RedisError as e:
            raise StoreError(f"idempotency record: {e}") from e
        if _text(got[0]) == "NEW":
            return "NEW", "", b""
        return _text(got[0]), _text(got[1]), bytes(got[2])

    def renew(self, record: str, claim_ms: int) -> None:
        """Extend the claim on ``record`` by ``claim_ms``."""
        try:
            self._r.pexpire(record, claim_ms)
        except RedisError as e:
            raise StoreError(f"idempotency record: {e}") from e

    def settle(self, record: str, owner: str, reply: bytes, ttl_ms: int) -> None:
        """Store ``owner``'s reply for ``ttl_ms``, or drop the record when ``reply`` is empty."""
        try:
            self._finish(keys=[record], args=[owner, reply, ttl_ms])
        except RedisError as e:
            raise StoreError(f"idempotency record: {e}") from e


class ClusterInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]  # generic in stubs
    """Idempotency keys and per-client rate limits for every unary RPC, state in Redis."""

    def __init__(
        self,
        state: RequestState,
        cfg: ClusterConfig,
        *,
        principal: Callable[[grpc.ServicerContext], str] = client_of,
        check_reply: Callable[[str, bytes], None] | None = None,
    ) -> None:
        """Set up.

        Args:
            state: the shared request state (``from_config`` opens it).
            cfg: the cluster settings.
            principal: maps a request to its client identifier.
            check_reply: called with (method, stored reply) before a replay; raises to
                refuse it (``certd.service.replycheck.ReplayCheck``); None replays unchecked.
        """
        self._state = state
        self._cfg = cfg
        self._principal = principal
        self._check_reply = check_reply

    @classmethod
    def from_config(
        cls, cluster: ClusterConfig, check_reply: Callable[[str, bytes], None] | None = None
    ) -> ClusterInterceptor:
        """The interceptor of a cluster replica, on its own connection to the cluster's store.

        The state is kept next to the shared ledger (same URL, same hash-tagged prefix or
        schema) but through a connection of its own: the ledger store stays closed to
        everything else.

        Raises:
            ConfigError: the config has no ``ledger_url``.
            StoreError: a PostgreSQL store cannot be reached.
        """
        if cluster.ledger_url is None:
            raise ConfigError("cluster.ledger_url: expected a Redis URL, got none")
        if cluster.ledger_url.startswith("postgres"):
            from certd.service.cluster_pg import PgClusterState

            pg = PgClusterState(
                cluster.ledger_url,
                schema=cluster.postgres_schema,
                connect_timeout_s=cluster.postgres_connect_timeout_s,
            )
            return cls(pg, cluster, check_reply=check_reply)
        client = redis.Redis.from_url(
            cluster.ledger_url,
            socket_timeout=cluster.redis_timeout_s,
            socket_connect_timeout=cluster.redis_timeout_s,
        )
        state = ClusterState(client, "{" + cluster.redis_prefix + "}")
        return cls(state, cluster, check_reply=check_reply)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(("/grpc.health.", "/grpc.reflection.")):
            return handler
        if handler.unary_unary is None:
            return self._rate_items(handler)
        inner = handler.unary_unary
        serialize = handler.response_serializer
        if serialize is None:
            return handler

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            client = self._principal(context)
            self.check_rate(client)
            key = dict(context.invocation_metadata()).get(IDEMPOTENCY_HEADER)
            if key is None:
                return inner(request, context)
            return self._once(client, method, str(key), request, context, inner, serialize)

        return grpc.unary_unary_rpc_method_handler(
            call,
            request_deserializer=handler.request_deserializer,
            response_serializer=lambda r: r if isinstance(r, bytes) else serialize(r),
        )

    def _rate_items(
        self, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        """The handler with one token taken per request message a client streams."""
        check = self.check_rate

        def each_item(requests: Iterator[Any], client: str) -> Iterator[Any]:
            for item in requests:
                check(client)  # as a unary call would, before the item is served
                yield item

        def metered(request: Any, client: str, streamed: bool) -> Any:
            if not streamed:
                check(client)
                return request
            return each_item(request, client)

        def unary(fn: Behaviour, streamed: bool) -> Behaviour:
            def call(request: Any, context: grpc.ServicerContext) -> Any:
                return fn(metered(request, self._principal(context), streamed), context)

            return call

        def stream(fn: Behaviour, streamed: bool) -> Behaviour:
            def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                yield from fn(metered(request, self._principal(context), streamed), context)

            return call

        return rewrap(handler, unary, stream)

    def check_rate(self, client: str) -> None:
        """Take one token from the client's bucket.

        Args:
            client: the client identifier.

        Raises:
            RateLimitedError: the bucket is empty.
            StoreError: Redis failed.
        """
        rate = self._cfg.rate_limit_per_s
        if rate <= 0:
            return
        wait_ms = self._state.take(client, rate, self._cfg.rate_limit_burst)
        if wait_ms is not None:
            raise RateLimitedError(
                f"rate limit: at most {rate:g} requests/s (burst {self._cfg.rate_limit_burst}) "
                f"per client; retry in {wait_ms} ms",
                retry_after_s=wait_ms / 1e3,
            )

    def _once(
        self,
        client: str,
        method: str,
        key: str,
        request: Any,
        context: grpc.ServicerContext,
        inner: Callable[[Any, grpc.ServicerContext], Any],
        serialize: Callable[[Any], bytes],
    ) -> Any:
        """Run the request once per (client, method, key), or replay the stored reply."""
        if not key or len(key) > _MAX_KEY_CHARS:
            raise InvalidInputError(
                f"{IDEMPOTENCY_HEADER}: expected 1 to {_MAX_KEY_CHARS} characters, got {len(key)}",
                field=IDEMPOTENCY_HEADER,
            )
        record = self._state.record(client, method, key)
        digest = hashlib.sha256(request.SerializeToString(deterministic=True)).hexdigest()
        owner = uuid.uuid4().hex
        replay = self._claim(record, key, digest, owner)
        if replay is not None:
            if self._check_reply is not None:
                self._check_reply(method, replay)  # a planted reply is refused, not served
            context.set_trailing_metadata((("certd-idempotent-replay", "1"),))
            return replay
        return self._run_claimed(record, owner, request, context, inner, serialize)

    def _claim(self, record: str, key: str, digest: str, owner: str) -> bytes | None:
        """Claim the record (None), or the reply stored under it by an earlier run.

        Raises:
            InvalidInputError: the key was used for a different request.
            InProgressError: another run still holds the claim after ``idempotency_wait_s``.
            StoreError: Redis failed.
        """
        claim_ms = int(self._cfg.idempotency_claim_s * 1000)
        deadline = time.monotonic() + self._cfg.idempotency_wait_s
        while True:
            state, requested, reply = self._state.claim(record, digest, owner, claim_ms)
            if state == "NEW":
                return None
            if requested != digest:
                raise InvalidInputError(
                    f"{IDEMPOTENCY_HEADER} {key!r} was used for a different request",
                    field=IDEMPOTENCY_HEADER,
                )
            if state == "done":
                return reply
            if time.monotonic() >= deadline:
                raise InProgressError(
                    f"a request with {IDEMPOTENCY_HEADER} {key!r} is still running; retry later"
                )
            time.sleep(0.02)

    def _run_claimed(
        self,
        record: str,
        owner: str,
        request: Any,
        context: grpc.ServicerContext,
        inner: Callable[[Any, grpc.ServicerContext], Any],
        serialize: Callable[[Any], bytes],
    ) -> Any:
        """Run the claimed request, renewing the claim meanwhile; store its reply."""
        claim_ms = int(self._cfg.idempotency_claim_s * 1000)
        ttl_ms = int(self._cfg.idempotency_ttl_s * 1000)
        done = threading.Event()

        def renew() -> None:
            while not done.wait(self._cfg.idempotency_claim_s / 3):
                try:
                    self._state.renew(record, claim_ms)
                except StoreError:
                    log.warning("cannot renew the idempotency claim %s", record)

        renewer = threading.Thread(target=renew, name="idempotency-renew", daemon=True)
        renewer.start()
        try:
            response = inner(request, context)
        except BaseException:
            done.set()
            self._state.settle(record, owner, b"", ttl_ms)
            raise
        done.set()
        self._state.settle(record, owner, serialize(response), ttl_ms)
        return response


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
