"""The cluster's shared request state in PostgreSQL: idempotency records and rate buckets.

Example::

    from certd.service.cluster_pg import PgClusterState
    state = PgClusterState("postgresql://db1,db2/certd", schema="certd")
    state.take("alice", rate_per_s=10.0, burst=20)   # None: a token was taken

The same four calls as ``certd.service.cluster.ClusterState`` (Redis), kept next to the
PostgreSQL ledger (same URL and schema) in two tables of their own::

    S.requests(record text PRIMARY KEY, state text, req text, owner text, resp bytea,
               expires_at timestamptz)
    S.rate(bucket text PRIMARY KEY, tokens double precision, ts timestamptz)

Times are the server's clock (``clock_timestamp()``), so replicas agree. Expired records are
deleted when they are claimed again and, now and then, in bulk. These sessions commit with
``synchronous_commit=off`` (no fsync, no standby wait): a record lost to a crash or failover
only lets a retry run again, and certifying twice yields the same certificate.
"""

from __future__ import annotations

import hashlib
import random

from certd.errors import StoreError
from certd.ledger.store.postgres_conn import PgConnections

__all__ = ["PgClusterState"]

_TABLES = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.requests (
    record text PRIMARY KEY, state text NOT NULL, req text NOT NULL, owner text NOT NULL,
    resp bytea NOT NULL, expires_at timestamptz NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.rate (
    bucket text PRIMARY KEY, tokens double precision NOT NULL, ts timestamptz NOT NULL);
"""

# A claim is one statement (one round trip): drop the record if it expired, then insert it
# or return the one there. (xmax = 0) tells a row this call inserted from one it found.
_CLAIM_FUNCTION = """
CREATE OR REPLACE FUNCTION {s}.claim_request(
    p_record text, p_req text, p_owner text, p_ms double precision)
RETURNS TABLE (o_new boolean, o_state text, o_req text, o_resp bytea)
LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM {s}.requests q WHERE q.record = p_record AND q.expires_at < clock_timestamp();
    RETURN QUERY
    INSERT INTO {s}.requests AS q (record, state, req, owner, resp, expires_at)
    VALUES (p_record, 'pending', p_req, p_owner, '', clock_timestamp() + p_ms * interval '1 ms')
    ON CONFLICT (record) DO UPDATE SET record = q.record
    RETURNING (q.xmax = 0), q.state, q.req, q.resp;
END
$fn$
"""

_CLAIM = "SELECT * FROM S.claim_request(%s, %s, %s, %s)"

_EXPIRED = "DELETE FROM S.requests WHERE expires_at < clock_timestamp()"

_TAKE = """
INSERT INTO S.rate AS b (bucket, tokens, ts) VALUES (%(b)s, %(burst)s - 1, clock_timestamp())
ON CONFLICT (bucket) DO UPDATE SET
  tokens = least(%(burst)s::float8, b.tokens
    + extract(epoch FROM clock_timestamp() - b.ts) * %(rate)s) - 1,
  ts = clock_timestamp()
RETURNING tokens
"""


class PgClusterState:
    """The cluster's shared request state in PostgreSQL (see the module docstring)."""

    def __init__(self, url: str, *, schema: str = "certd", connect_timeout_s: float = 5.0) -> None:
        """Connect and create the tables when missing.

        Args:
            url: the cluster's PostgreSQL URL (the ledger's).
            schema: the ledger's schema (validated by the config).
            connect_timeout_s: the timeout of each connection attempt, per host.

        Raises:
            ConfigError: the URL is not valid.
            StoreError: PostgreSQL cannot be reached.
        """
        self._schema = schema
        # Request state need not wait for the standby: a record lost in a failover only
        # lets a retry run again, and certifying twice yields the same certificate.
        self._conns = PgConnections(
            url, connect_timeout_s=connect_timeout_s, synchronous_commit="off"
        )
        with self._conns.transaction("create the request tables") as cur:
            cur.execute(b"SELECT pg_advisory_xact_lock(1667592820)")
            for statement in _TABLES.format(s=schema).split(";"):
                if statement.strip():
                    cur.execute(statement.encode())
            cur.execute(_CLAIM_FUNCTION.format(s=schema).encode())

    def _sql(self, text: str) -> bytes:
        return text.replace("S.", f"{self._schema}.").encode()

    def take(self, client: str, rate_per_s: float, burst: int) -> int | None:
        """Take one token from ``client``'s bucket; None when taken, else the ms until one is.

        A refused request still spends its token (the bucket goes below zero), so a client
        that keeps hammering waits longer, as with the Redis limiter's clock.
        """
        bucket = hashlib.sha256(client.encode()).hexdigest()[:32]
        with self._conns.transaction("take a rate-limit token") as cur:
            cur.execute(self._sql(_TAKE), {"b": bucket, "burst": burst, "rate": rate_per_s})
            row = cur.fetchone()
            tokens = float(str(row[0])) if row else 0.0
            if tokens < 0:  # refused: give the token back so the bucket never goes negative
                cur.execute(
                    self._sql("UPDATE S.rate SET tokens = tokens + 1 WHERE bucket = %s"), (bucket,)
                )
        if tokens >= 0:
            return None
        return max(1, int(-tokens * 1000 / rate_per_s) + 1)

    def record(self, client: str, method: str, key: str) -> str:
        """The idempotency record of (client, method, key)."""
        return hashlib.sha256(f"{client}\n{method}\n{key}".encode()).hexdigest()

    def claim(self, record: str, digest: str, owner: str, claim_ms: int) -> tuple[str, str, bytes]:
        """Claim ``record`` for ``owner`` unless it exists (see ``ClusterState.claim``)."""
        with self._conns.cursor("claim an idempotency record") as cur:
            if random.random() < 0.01:
                cur.execute(self._sql(_EXPIRED))
            cur.execute(self._sql(_CLAIM), (record, digest, owner, claim_ms))
            row = cur.fetchone()
        if row is None:
            raise StoreError("idempotency record: the claim returned no row")
        new, state, requested, reply = row
        if new:
            return "NEW", "", b""
        return str(state), str(requested), bytes(reply) if isinstance(reply, bytes) else b""

    def renew(self, record: str, claim_ms: int) -> None:
        """Extend the claim on ``record`` by ``claim_ms``."""
        with self._conns.cursor("renew an idempotency claim") as cur:
            cur.execute(
                self._sql(
                    "UPDATE S.requests SET expires_at = clock_timestamp() + %s * interval '1 ms'"
                    " WHERE record = %s AND state = 'pending'"
                ),
                (claim_ms, record),
            )

    def settle(self, record: str, owner: str, reply: bytes, ttl_ms: int) -> None:
        """Store ``owner``'s reply for ``ttl_ms``, or drop the record when ``reply`` is empty."""
        with self._conns.cursor("settle an idempotency record") as cur:
            if not reply:
                cur.execute(
                    self._sql("DELETE FROM S.requests WHERE record = %s AND owner = %s"),
                    (record, owner),
                )
                return
            cur.execute(
                self._sql(
                    "UPDATE S.requests SET state = 'done', resp = %s,"
                    " expires_at = clock_timestamp() + %s * interval '1 ms'"
                    " WHERE record = %s AND owner = %s"
                ),
                (reply, ttl_ms, record, owner),
            )

    def close(self) -> None:
        """Close every session."""
        self._conns.close()
