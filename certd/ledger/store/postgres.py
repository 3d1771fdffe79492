"""The cluster ledger store on PostgreSQL: shared by every certd replica, survives a failover.

Example::

    from certd.ledger.store.postgres import PostgresStore
    store = PostgresStore("postgresql://db1:5432,db2:5432/certd", schema="certd")
    store.append([("k1", b"entry one")])     # 0, from whichever replica gets there first
    store.close()

Tables (in the schema ``S``, created when missing)::

    S.meta(name text PRIMARY KEY, value bigint)        schema_version, tree_size
    S.entries(idx bigint PRIMARY KEY, data bytea)
    S.keys(key text COLLATE "C" PRIMARY KEY, idx bigint)   every part of an entry's key
    S.nodes(level int, idx bigint, hash bytea, PRIMARY KEY(level, idx))   complete subtrees
    S.checkpoints(size bigint PRIMARY KEY, note text)   signed checkpoint notes

Sequencing: an append is one statement, so one round trip and one transaction (the
function ``S.append_batch``, created with the tables). It locks the ``tree_size`` row
(``FOR UPDATE``), compares it with the size the replica built its Merkle nodes on
(compare-and-set: a replica
that lost the race gets ``AppendConflictError`` and nothing is written), refuses a key part
that is stored already (an entry may claim several keys joined by ``KEY_SEPARATOR``, as in
the Redis store), then writes the entries, their keys, every complete node they create and
the new size. Indexes have no gaps and no duplicates however many replicas append at once.
Replicas queue for the append on an advisory lock (``writer_lock``), an optimisation only.

Durability: every session runs ``synchronous_commit=on`` (``certd.ledger.store.postgres_conn``):
an append is acknowledged after its WAL is flushed on the primary and, when the primary
names a synchronous standby (``synchronous_standby_names``), on the standby too, so an
acknowledged entry survives losing the primary. ``require_sync_standby`` makes the store
refuse to open on a server without one. See ``docs/operating-a-cluster.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from certd.errors import ConfigError, StoreError
from certd.ledger.store.interface import (
    KEY_SEPARATOR,
    AppendConflictError,
    DuplicateKeyError,
    Entry,
    LedgerStore,
    Node,
    StoreLimits,
)
from certd.ledger.store.postgres_arrays import bytea_array, int4_array, int8_array, text_array
from certd.ledger.store.postgres_conn import PgConnections, postgres_url_ok

__all__ = ["PostgresStore", "SCHEMA_VERSION", "postgres_url_ok"]

SCHEMA_VERSION = 1
"""Version of the table layout written in ``S.meta.schema_version``."""

_SCHEMA = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.meta (name text PRIMARY KEY, value bigint NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.entries (idx bigint PRIMARY KEY, data bytea NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.keys (key text COLLATE "C" PRIMARY KEY, idx bigint NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.nodes (
    level integer NOT NULL, idx bigint NOT NULL, hash bytea NOT NULL, PRIMARY KEY (level, idx));
CREATE TABLE IF NOT EXISTS {s}.checkpoints (size bigint PRIMARY KEY, note text NOT NULL);
INSERT INTO {s}.meta VALUES ('schema_version', {v}) ON CONFLICT DO NOTHING;
INSERT INTO {s}.meta VALUES ('tree_size', 0) ON CONFLICT DO NOTHING;
"""

# The whole append as one statement (one round trip, committed by autocommit): the
# compare-and-set on tree_size under FOR UPDATE, the stored-key refusal, then the rows.
# It returns (true, new size, NULL, NULL) on success, (false, stored size, NULL, NULL) on a
# size mismatch and (false, size, key, index) per key part taken; then nothing is written.
_APPEND_FUNCTION = """
CREATE OR REPLACE FUNCTION {s}.append_batch(
    p_first bigint, p_keys text[], p_key_idx bigint[], p_data bytea[],
    p_levels integer[], p_nidx bigint[], p_hashes bytea[])
RETURNS TABLE (ok boolean, stored bigint, taken_key text, taken_idx bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    current_size bigint;
BEGIN
    SELECT m.value INTO current_size FROM {s}.meta m WHERE m.name = 'tree_size' FOR UPDATE;
    IF current_size IS DISTINCT FROM p_first THEN
        RETURN QUERY SELECT false, coalesce(current_size, -1), NULL::text, NULL::bigint;
        RETURN;
    END IF;
    RETURN QUERY SELECT false, current_size, k.key::text, k.idx FROM {s}.keys k
        WHERE k.key = ANY(p_keys);
    IF FOUND THEN
        RETURN;
    END IF;
    INSERT INTO {s}.keys (key, idx) SELECT * FROM unnest(p_keys, p_key_idx);
    INSERT INTO {s}.entries (idx, data)
        SELECT p_first + t.o - 1, t.d FROM unnest(p_data) WITH ORDINALITY AS t(d, o);
    INSERT INTO {s}.nodes (level, idx, hash) SELECT * FROM unnest(p_levels, p_nidx, p_hashes);
    UPDATE {s}.meta SET value = p_first + cardinality(p_data) WHERE name = 'tree_size';
    RETURN QUERY SELECT true, p_first + cardinality(p_data), NULL::text, NULL::bigint;
END
$fn$
"""

_BINARY = "(FORMAT BINARY)"  # no hex escaping of the entry bytes
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_LOCK_SPACE = 0x63657274  # "cert": the advisory lock's first key


class PostgresStore(LedgerStore):
    """A ``LedgerStore`` in PostgreSQL, shared by any number of certd processes."""

    shared = True
    write_refuses_stored_keys = True  # append_batch refuses a stored key part, writing nothing

    def __init__(
        self,
        url: str,
        *,
        schema: str = "certd",
        limits: StoreLimits | None = None,
        connect_timeout_s: float = 5.0,
        require_sync_standby: bool = False,
    ) -> None:
        """Connect, create the tables when missing and check the layout.

        Args:
            url: ``postgresql://host[:port][,host[:port]...]/dbname[?params]``.
            schema: the schema holding the tables; one database can hold several ledgers.
            limits: the store limits, or None for the defaults.
            connect_timeout_s: the timeout of each connection attempt, per host.
            require_sync_standby: refuse a server that names no synchronous standby.

        Raises:
            ConfigError: the URL or schema name is not valid, or a standby is required and
                the server names none.
            StoreError: PostgreSQL cannot be reached, or holds another schema version.
        """
        super().__init__(limits)
        if not _SCHEMA_NAME.match(schema):
            raise ConfigError(f"expected a lower-case SQL identifier as schema, got {schema!r}")
        self.url = url
        self.schema = schema
        self._conns = PgConnections(url, connect_timeout_s=connect_timeout_s)
        self._lock_key = _LOCK_SPACE ^ hash_schema(schema)
        with self._conns.transaction("create the ledger tables") as cur:
            cur.execute(f"SELECT pg_advisory_xact_lock({_LOCK_SPACE})")  # one creator at a time
            for statement in _SCHEMA.format(s=schema, v=SCHEMA_VERSION).split(";"):
                if statement.strip():
                    cur.execute(statement.encode())
            cur.execute(_APPEND_FUNCTION.format(s=schema).encode())
            cur.execute(f"SELECT value FROM {schema}.meta WHERE name = 'schema_version'".encode())
            row = cur.fetchone()
            cur.execute(b"SHOW synchronous_standby_names")
            standby = cur.fetchone()
        version = None if row is None else row[0]
        if version != SCHEMA_VERSION:
            raise StoreError(f"expected schema version {SCHEMA_VERSION} in {schema}, got {version}")
        if require_sync_standby and not (standby and str(standby[0]).strip()):
            raise ConfigError(
                f"expected the PostgreSQL primary at {url} to name a synchronous standby "
                "(synchronous_standby_names), got none"
            )

    @property
    def _append_sql(self) -> bytes:
        return self._sql(
            "SELECT * FROM S.append_batch(%b::bigint, %b::text[], %b::bigint[], %b::bytea[],"
            " %b::integer[], %b::bigint[], %b::bytea[])"
        )

    def _sql(self, text: str) -> bytes:
        return text.replace("S.", f"{self.schema}.").encode()

    # -- hooks --------------------------------------------------------------------------------

    def _read_size(self) -> int:
        with self._conns.cursor("read the tree size") as cur:
            cur.execute(self._sql("SELECT value FROM S.meta WHERE name = 'tree_size'"))
            row = cur.fetchone()
        if row is None:
            raise StoreError("expected a tree_size row in meta, got none")
        return int(str(row[0]))

    def _read_unexplained(self, size: int, limit: int) -> list[str]:
        queries = (
            ("entry", "SELECT idx::text FROM S.entries WHERE idx >= %s OR idx < 0 LIMIT %s"),
            (
                "node",
                "SELECT level || ',' || idx FROM S.nodes"
                " WHERE ((idx + 1) << level) > %s OR idx < 0 LIMIT %s",
            ),
            ("key", "SELECT key || ' -> ' || idx FROM S.keys WHERE idx >= %s LIMIT %s"),
            ("checkpoint", "SELECT size::text FROM S.checkpoints WHERE size > %s LIMIT %s"),
        )
        out: list[str] = []
        with self._conns.cursor("look for rows beyond the tree") as cur:
            for what, sql in queries:
                cur.execute(self._sql(sql), (size, limit))
                out += [f"{what} at {w} beyond the tree size {size}" for (w,) in cur.fetchall()]
        return out[:limit]

    def _read_entries(self, start: int, end: int) -> list[bytes | None]:
        if end <= start:
            return []
        out: list[bytes | None] = [None] * (end - start)
        with self._conns.cursor(f"read entries [{start}, {end})") as cur:
            cur.execute(
                self._sql("SELECT idx, data FROM S.entries WHERE idx >= %s AND idx < %s"),
                (start, end),
                binary=True,  # the bytes as they are: no hex on the wire
            )
            for idx, data in cur.fetchall():
                out[_int(idx) - start] = _bytes(data)
        return out

    def _read_entry_set(self, indexes: Sequence[int]) -> list[bytes | None]:
        found: dict[int, bytes] = {}
        with self._conns.cursor(f"read {len(indexes)} entries") as cur:
            cur.execute(
                self._sql("SELECT idx, data FROM S.entries WHERE idx = ANY(%b::bigint[])"),
                (int8_array(indexes),),
                binary=True,
            )
            found = {_int(i): _bytes(d) for i, d in cur.fetchall()}
        return [found.get(i) for i in indexes]

    def _read_nodes(self, level: int, start: int, end: int) -> list[bytes | None]:
        if end <= start:
            return []
        out: list[bytes | None] = [None] * (end - start)
        with self._conns.cursor(f"read nodes at level {level}") as cur:
            cur.execute(
                self._sql(
                    "SELECT idx, hash FROM S.nodes WHERE level = %s AND idx >= %s AND idx < %s"
                ),
                (level, start, end),
                binary=True,
            )
            for idx, h in cur.fetchall():
                out[_int(idx) - start] = _bytes(h)
        return out

    def _read_node_ranges(self, ranges: Sequence[tuple[int, int, int]]) -> list[list[bytes | None]]:
        out: list[list[bytes | None]] = [[None] * (end - start) for _, start, end in ranges]
        if not any(end > start for _, start, end in ranges):
            return out
        with self._conns.cursor(f"read nodes at {len(ranges)} levels") as cur:
            cur.execute(
                self._sql(
                    "SELECT r.o, n.idx, n.hash FROM unnest(%b::int[], %b::bigint[], %b::bigint[])"
                    " WITH ORDINALITY AS r(level, lo, hi, o)"
                    " JOIN S.nodes n ON n.level = r.level AND n.idx >= r.lo AND n.idx < r.hi"
                ),
                (
                    int4_array([r[0] for r in ranges]),
                    int8_array([r[1] for r in ranges]),
                    int8_array([r[2] for r in ranges]),
                ),
                binary=True,
            )
            for o, idx, h in cur.fetchall():
                n = _int(o) - 1
                out[n][_int(idx) - ranges[n][1]] = _bytes(h)
        return out

    def _read_node_set(self, coords: Sequence[tuple[int, int]]) -> list[bytes | None]:
        if not coords:
            return []
        with self._conns.cursor(f"read {len(coords)} nodes") as cur:
            cur.execute(
                self._sql(
                    "SELECT n.level, n.idx, n.hash FROM S.nodes n"
                    " JOIN unnest(%b::int[], %b::bigint[]) AS c(level, idx)"
                    " ON n.level = c.level AND n.idx = c.idx"
                ),
                (int4_array([c[0] for c in coords]), int8_array([c[1] for c in coords])),
                binary=True,
            )
            found = {(_int(lv), _int(i)): _bytes(h) for lv, i, h in cur.fetchall()}
        return [found.get(c) for c in coords]

    def _find_keys(self, keys: Sequence[str]) -> dict[str, int]:
        if not keys:
            return {}
        parts = [[p for p in k.split(KEY_SEPARATOR) if p] for k in keys]
        flat = sorted({p for ps in parts for p in ps})
        with self._conns.cursor("look up keys") as cur:
            cur.execute(
                self._sql("SELECT key, idx FROM S.keys WHERE key = ANY(%b::text[])"),
                (text_array(flat),),
            )
            at = {str(k): _int(i) for k, i in cur.fetchall()}
        found: dict[str, int] = {}
        for key, ps in zip(keys, parts, strict=True):
            hit = next((at[p] for p in ps if p in at), None)
            if hit is not None:
                found[key] = hit
        return found

    def _scan_keys(self, prefix: str) -> list[tuple[str, int]] | None:
        pattern = "".join("\\" + c if c in "%_\\" else c for c in prefix) + "%"
        with self._conns.cursor(f"list keys {prefix!r}*") as cur:
            cur.execute(self._sql("SELECT key, idx FROM S.keys WHERE key LIKE %s"), (pattern,))
            return [(str(k), _int(i)) for k, i in cur.fetchall()]

    def _write_batch(self, first: int, entries: Sequence[Entry], nodes: Sequence[Node]) -> None:
        key_rows = _key_rows(first, entries)
        params = (
            first,
            text_array([k for k, _ in key_rows]),
            int8_array([i for _, i in key_rows]),
            bytea_array([data for _, data in entries]),
            int4_array([n[0] for n in nodes]),
            int8_array([n[1] for n in nodes]),
            bytea_array([n[2] for n in nodes]),
        )
        with self._conns.cursor(f"append {len(entries)} entries at {first}") as cur:
            cur.execute(self._append_sql, params)
            rows = cur.fetchall()
        taken = {str(k): _int(i) for _, _, k, i in rows if k is not None}
        if taken:
            for key, _ in entries:
                for part in (key or "").split(KEY_SEPARATOR):
                    if part in taken:
                        raise DuplicateKeyError(key or part, taken[part])
        if len(rows) != 1 or rows[0][0] is not True:
            raise AppendConflictError(first, _int(rows[0][1]) if rows else -1)

    def _write_checkpoint(self, size: int, signed_note: str) -> None:
        # One statement (one round trip, one commit): the size is checked against tree_size
        # under FOR SHARE, so no append commits between the check and the insert.
        with self._conns.cursor(f"store the checkpoint at size {size}") as cur:
            cur.execute(
                self._sql(
                    "WITH t AS (SELECT value FROM S.meta WHERE name = 'tree_size' FOR SHARE)"
                    " INSERT INTO S.checkpoints (size, note) SELECT %s, %s FROM t"
                    " WHERE %s <= t.value"
                    " ON CONFLICT (size) DO UPDATE SET note = excluded.note RETURNING size"
                ),
                (size, signed_note, size),
            )
            row = cur.fetchone()
        if row is None:
            raise StoreError(f"checkpoint at size {size} is beyond the stored tree")

    def _read_checkpoint(self, size: int | None) -> tuple[int, str] | None:
        with self._conns.cursor("read checkpoints") as cur:
            if size is None:
                cur.execute(
                    self._sql("SELECT size, note FROM S.checkpoints ORDER BY size DESC LIMIT 1")
                )
            else:
                cur.execute(
                    self._sql("SELECT size, note FROM S.checkpoints WHERE size = %s"), (size,)
                )
            row = cur.fetchone()
        return None if row is None else (_int(row[0]), str(row[1]))

    @contextmanager
    def writer_lock(self) -> Iterator[None]:
        """A session advisory lock around one replica's commit, so replicas queue.

        An optimisation: appends stay compare-and-set. The lock is this thread's session's,
        so the append inside runs on the same session; a session that dies releases it.
        """
        with self._conns.cursor("take the writer lock") as cur:
            cur.execute(b"SELECT pg_advisory_lock(%s)", (self._lock_key,))
        try:
            yield
        finally:
            try:
                with self._conns.cursor("release the writer lock") as cur:
                    cur.execute(b"SELECT pg_advisory_unlock(%s)", (self._lock_key,))
            except StoreError:
                pass  # the session is gone, and its lock with it

    def ping(self) -> None:
        """Check that a read-write server answers.

        Raises:
            StoreError: none does.
        """
        with self._conns.cursor("reach PostgreSQL") as cur:
            cur.execute(b"SELECT 1")

    def close(self) -> None:
        """Close every session. Idempotent."""
        self._conns.close()


def hash_schema(schema: str) -> int:
    """A stable 31-bit number for the schema name (the advisory lock's key)."""
    h = 0
    for c in schema.encode():
        h = (h * 131 + c) & 0x7FFFFFFF
    return h


def _key_rows(first: int, entries: Sequence[Entry]) -> list[tuple[str, int]]:
    """The ``(key part, index)`` rows of an append.

    Raises:
        DuplicateKeyError: a key part is claimed twice in the append.
    """
    rows: list[tuple[str, int]] = []
    seen: set[str] = set()
    for i, (key, _) in enumerate(entries):
        for part in (key or "").split(KEY_SEPARATOR):
            if not part:
                continue
            if part in seen:
                raise DuplicateKeyError(key or part, None)
            seen.add(part)
            rows.append((part, first + i))
    return rows


def _int(value: object) -> int:
    if isinstance(value, int):
        return value
    raise StoreError(f"expected an integer from PostgreSQL, got {type(value).__name__}")


def _bytes(value: object) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise StoreError(f"expected bytes from PostgreSQL, got {type(value).__name__}")
