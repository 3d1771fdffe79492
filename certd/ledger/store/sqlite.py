"""The embedded ledger store: one SQLite file in WAL mode.

Example:
    >>> import tempfile, pathlib
    >>> from certd.ledger.store.sqlite import SQLiteStore
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "ledger.db"
    >>> store = SQLiteStore(path)
    >>> store.append([(None, b"a"), (None, b"b")])
    0
    >>> store.close()
    >>> SQLiteStore(path).size()
    2

Tables::

    meta(name TEXT PRIMARY KEY, value INTEGER)              schema_version, tree_size
    entries(idx INTEGER PRIMARY KEY, key TEXT UNIQUE, data BLOB)
    nodes(level INTEGER, idx INTEGER, hash BLOB, PRIMARY KEY(level, idx))   complete subtrees
    checkpoints(size INTEGER PRIMARY KEY, note TEXT)        signed checkpoint notes

Durability: every ``append`` is one ``BEGIN IMMEDIATE … COMMIT`` transaction. With
``synchronous="FULL"`` (the default) the WAL is fsynced at each commit, so a committed
append survives power loss. ``"NORMAL"`` skips that fsync: still atomic and safe against a
process crash, but the last commits may be lost on power failure.

Threads: one writer connection behind a lock; each reading thread gets its own read-only
connection (WAL readers do not block the writer). An in-memory database (``":memory:"``)
reads through the writer connection instead.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from certd.errors import ConfigError, StoreError
from certd.ledger.store.interface import DuplicateKeyError, Entry, LedgerStore, Node, StoreLimits

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

SCHEMA_VERSION = 1
"""Version of the table layout written in ``meta.schema_version``."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entries (
    idx INTEGER PRIMARY KEY, key TEXT UNIQUE, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (
    level INTEGER NOT NULL, idx INTEGER NOT NULL, hash BLOB NOT NULL,
    PRIMARY KEY (level, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints (size INTEGER PRIMARY KEY, note TEXT NOT NULL);
"""

_SYNC_MODES = ("FULL", "NORMAL", "EXTRA")


def _blob(value: object) -> bytes | None:
    """A stored BLOB as bytes; None for a value of another type (a damaged row)."""
    if type(value) is bytes:
        return value
    return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else None


_KEY_CHUNK = 500


def _rows_in(conn: sqlite3.Connection, query: str, values: Sequence[object]) -> Iterator[Any]:
    """The rows of ``query IN (values)``, asked ``_KEY_CHUNK`` values at a time (SQLite's
    limit on bound parameters); ``query`` ends with the column the values match."""
    for i in range(0, len(values), _KEY_CHUNK):
        chunk = list(values[i : i + _KEY_CHUNK])
        yield from conn.execute(f"{query} IN ({','.join('?' * len(chunk))})", chunk)


class SQLiteStore(LedgerStore):
    """A ``LedgerStore`` in one SQLite database file."""

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "FULL",
        limits: StoreLimits | None = None,
        busy_timeout_s: float = 30.0,
    ) -> None:
        """Open (or create) a store.

        Args:
            path: the database file, or ``":memory:"`` for a throwaway store.
            synchronous: SQLite ``synchronous`` mode: ``"FULL"`` (durable at each commit),
                ``"EXTRA"`` or ``"NORMAL"`` (see the module docstring).
            limits: the store limits, or None for the defaults.
            busy_timeout_s: how long to wait for a lock held by another connection.

        Raises:
            ConfigError: ``synchronous`` is not a known mode.
            StoreError: the file cannot be opened, is not a ledger, or has another schema.
        """
        super().__init__(limits)
        mode = synchronous.upper()
        if mode not in _SYNC_MODES:
            raise ConfigError(f"expected synchronous in {_SYNC_MODES}, got {synchronous!r}")
        self._path = str(path)
        self._memory = self._path == ":memory:"
        self._timeout = busy_timeout_s
        self._lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._closed = False
        try:
            self._conn = sqlite3.connect(
                self._path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            if not self._memory:
                (journal,) = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()
                if str(journal).lower() != "wal":
                    raise StoreError(f"expected WAL journal mode, got {journal!r}")
            self._conn.execute(f"PRAGMA synchronous={mode}")
            self._init_schema()
            self._size = self._query_size(self._conn)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open ledger database {self._path}: {e}") from e

    def _init_schema(self) -> None:
        with self._tx():
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._conn.execute(statement)
            self._conn.execute(
                "INSERT OR IGNORE INTO meta(name, value) VALUES ('schema_version', ?)",
                (SCHEMA_VERSION,),
            )
            self._conn.execute("INSERT OR IGNORE INTO meta(name, value) VALUES ('tree_size', 0)")
            (version,) = self._conn.execute(
                "SELECT value FROM meta WHERE name = 'schema_version'"
            ).fetchone()
        if version != SCHEMA_VERSION:
            raise StoreError(f"expected schema version {SCHEMA_VERSION}, got {version}")

    @staticmethod
    def _query_size(conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT value FROM meta WHERE name = 'tree_size'").fetchone()
        if row is None:
            raise StoreError("expected a tree_size row in meta, got none")
        return int(row[0])

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """Run a write transaction on the writer connection; roll back on any error."""
        with self._lock:
            self._check_open()
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """Yield a connection to read committed data from."""
        self._check_open()
        if self._memory:
            with self._lock:
                yield self._conn
            return
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._lock:
                self._readers.append(conn)
        yield conn

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("expected an open store, got a closed one")

    # -- hooks --------------------------------------------------------------------------------

    def _read_size(self) -> int:
        self._check_open()
        return self._size

    def _read_unexplained(self, size: int, limit: int) -> list[str]:
        # Range seeks on the primary keys (an OR, or an expression over a column, would scan
        # every row: seconds on a 1M-entry store at each start).
        queries: list[tuple[str, str, tuple[int, ...]]] = [
            ("entry", "SELECT idx FROM entries WHERE idx >= ? ORDER BY idx LIMIT ?", (size,)),
            ("entry", "SELECT idx FROM entries WHERE idx < 0 LIMIT ?", ()),
            ("checkpoint", "SELECT size FROM checkpoints WHERE size > ? LIMIT ?", (size,)),
            ("checkpoint", "SELECT size FROM checkpoints WHERE size < 0 LIMIT ?", ()),
        ]
        node = "SELECT level || ',' || idx FROM nodes WHERE level = ? AND (idx >= ?) LIMIT ?"
        below = "SELECT level || ',' || idx FROM nodes WHERE level = ? AND idx < 0 LIMIT ?"
        for level in range(64):
            queries += [("node", node, (level, size >> level)), ("node", below, (level,))]
        for bad_level in ("level < 0", "level > 63"):
            sql = f"SELECT level || ',' || idx FROM nodes WHERE {bad_level} LIMIT ?"
            queries.append(("node", sql, ()))
        out: list[str] = []
        try:
            with self._read() as conn:
                for what, sql, args in queries:
                    for (where,) in conn.execute(sql, (*args, limit)):
                        out.append(f"{what} at {where} beyond the tree size {size}")
        except sqlite3.Error as e:
            raise StoreError(f"cannot look for rows beyond the tree: {e}") from e
        return out[:limit]

    def _read_garbled(self, size: int, limit: int) -> list[str]:
        # Whole-table counts (each read from the smallest index, not the rows): with no row
        # beyond the tree (``_read_unexplained``), a short count is a hole inside it.
        wanted = {"entry": size, "node": 2 * size - size.bit_count()}
        counts = {"entry": "SELECT count(*) FROM entries", "node": "SELECT count(*) FROM nodes"}
        out: list[str] = []
        try:
            with self._read() as conn:
                for what, sql in counts.items():
                    (have,) = conn.execute(sql).fetchone()
                    if have < wanted[what]:
                        out.append(f"{wanted[what] - have} {what} rows missing below size {size}")
        except sqlite3.Error as e:
            raise StoreError(f"cannot count the stored rows: {e}") from e
        return out[:limit]

    def _read_entries(self, start: int, end: int) -> list[bytes | None]:
        out: list[bytes | None] = [None] * (end - start)
        try:
            with self._read() as conn:
                for idx, data in conn.execute(
                    "SELECT idx, data FROM entries WHERE idx >= ? AND idx < ? ORDER BY idx",
                    (start, end),
                ):
                    out[idx - start] = _blob(data)
        except sqlite3.Error as e:
            raise StoreError(f"cannot read entries [{start}, {end}): {e}") from e
        return out

    def _read_nodes(self, level: int, start: int, end: int) -> list[bytes | None]:
        out: list[bytes | None] = [None] * (end - start)
        try:
            with self._read() as conn:
                if end - start == 1:
                    row = conn.execute(
                        "SELECT hash FROM nodes WHERE level = ? AND idx = ?", (level, start)
                    ).fetchone()
                    return [None if row is None else _blob(row[0])]
                for idx, h in conn.execute(
                    "SELECT idx, hash FROM nodes WHERE level = ? AND idx >= ? AND idx < ?"
                    " ORDER BY idx",
                    (level, start, end),
                ):
                    out[idx - start] = _blob(h)
        except sqlite3.Error as e:
            raise StoreError(f"cannot read nodes at level {level}: {e}") from e
        return out

    def _scan_keys(self, prefix: str) -> list[tuple[str, int]] | None:
        try:
            with self._read() as conn:
                rows = conn.execute(
                    "SELECT key, idx FROM entries WHERE key >= ? AND key < ?",
                    (prefix, prefix + "\U0010ffff"),
                ).fetchall()
        except sqlite3.Error as e:
            raise StoreError(f"cannot list keys {prefix!r}*: {e}") from e
        return [(str(k), int(i)) for k, i in rows]

    def _read_entry_set(self, indexes: Sequence[int]) -> list[bytes | None]:
        found: dict[int, bytes] = {}
        try:
            with self._read() as conn:
                for idx, data in _rows_in(conn, "SELECT idx, data FROM entries WHERE idx", indexes):
                    blob = _blob(data)
                    if blob is not None:
                        found[int(idx)] = blob
        except sqlite3.Error as e:
            raise StoreError(f"cannot read {len(indexes)} entries: {e}") from e
        return [found.get(i) for i in indexes]

    def _find_keys(self, keys: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        try:
            with self._read() as conn:
                for key, idx in _rows_in(conn, "SELECT key, idx FROM entries WHERE key", keys):
                    found[key] = int(idx)
        except sqlite3.Error as e:
            raise StoreError(f"cannot look up keys: {e}") from e
        return found

    def _write_batch(self, first: int, entries: Sequence[Entry], nodes: Sequence[Node]) -> None:
        new_size = first + len(entries)
        try:
            with self._tx() as conn:
                stored = self._query_size(conn)
                if stored != first:
                    self._size = stored  # another writer moved on; a retry starts from here
                    raise StoreError(
                        f"expected tree size {first} at commit, got {stored}: "
                        f"another writer appended"
                    )
                conn.executemany(
                    "INSERT INTO entries(idx, key, data) VALUES (?, ?, ?)",
                    ((first + i, key, data) for i, (key, data) in enumerate(entries)),
                )
                conn.executemany("INSERT INTO nodes(level, idx, hash) VALUES (?, ?, ?)", nodes)
                conn.execute("UPDATE meta SET value = ? WHERE name = 'tree_size'", (new_size,))
        except sqlite3.IntegrityError as e:
            keys = [k for k, _ in entries if k is not None]
            stored_keys = self._find_keys(keys)
            if stored_keys:
                key = next(k for k in keys if k in stored_keys)
                raise DuplicateKeyError(key, stored_keys[key]) from e
            raise StoreError(f"append of {len(entries)} entries at {first} failed: {e}") from e
        except sqlite3.Error as e:
            raise StoreError(f"append of {len(entries)} entries at {first} failed: {e}") from e
        self._size = new_size

    def _write_checkpoint(self, size: int, signed_note: str) -> None:
        try:
            with self._tx() as conn:
                conn.execute(
                    "INSERT OR REPLACE INTO checkpoints(size, note) VALUES (?, ?)",
                    (size, signed_note),
                )
        except sqlite3.Error as e:
            raise StoreError(f"cannot store the checkpoint at size {size}: {e}") from e

    def _read_checkpoint(self, size: int | None) -> tuple[int, str] | None:
        try:
            with self._read() as conn:
                if size is None:
                    row = conn.execute(
                        "SELECT size, note FROM checkpoints ORDER BY size DESC LIMIT 1"
                    ).fetchone()
                else:
                    row = conn.execute(
                        "SELECT size, note FROM checkpoints WHERE size = ?", (size,)
                    ).fetchone()
        except sqlite3.Error as e:
            raise StoreError(f"cannot read checkpoints: {e}") from e
        return None if row is None else (int(row[0]), str(row[1]))

    def close(self) -> None:
        """Close every connection. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            self._conn.close()
