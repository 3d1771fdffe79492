"""Connections to the PostgreSQL ledger: the URL, per-thread sessions, reconnect on failover.

Example::

    from certd.ledger.store.postgres_conn import PgConnections
    conns = PgConnections("postgresql://db1:5432,db2:5432/certd", connect_timeout_s=2.0)
    with conns.cursor() as cur:
        cur.execute("SELECT 1")
    conns.close()

Every thread gets its own session (psycopg connections are not shared between threads here).
A session that fails (the server died, a failover closed it) is dropped, and the next call
opens a new one: with several hosts in the URL, libpq tries them in order and
``target_session_attrs=read-write`` (added when the URL sets none) skips a standby, so the
replicas find a promoted standby on their own. Each session runs with
``synchronous_commit=on``: a commit returns once the WAL is flushed locally and, when the
server names a synchronous standby (``synchronous_standby_names``), on that standby too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from certd.errors import ConfigError, StoreError

__all__ = ["PgConnections", "conninfo_for", "postgres_url_ok"]

_SCHEMES = ("postgresql", "postgres")


def postgres_url_ok(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL server (``postgresql://`` or ``postgres://``).

    Args:
        url: the ``--ledger`` value.

    Returns:
        True for a PostgreSQL URL.
    """
    return urlsplit(url).scheme in _SCHEMES


def conninfo_for(url: str, connect_timeout_s: float, synchronous_commit: str = "on") -> str:
    """The libpq connection string certd uses for ``url``.

    Adds ``target_session_attrs=read-write`` (unless the URL sets it), a connect timeout
    (unless set) and ``synchronous_commit`` for the session (``on`` for the ledger: the URL
    cannot weaken it).

    Args:
        url: ``postgresql://host[:port][,host[:port]...]/dbname[?params]``.
        connect_timeout_s: the timeout of each connection attempt, per host.
        synchronous_commit: the session's ``synchronous_commit`` (``on``, ``off``, ...).

    Raises:
        ConfigError: the URL is not a PostgreSQL URL or cannot be parsed.

    Returns:
        The conninfo string.
    """
    if not postgres_url_ok(url):
        raise ConfigError(f"expected a postgresql:// URL, got {url!r}")
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as e:
        raise ConfigError(f"cannot parse the PostgreSQL URL: {e}") from e
    params.setdefault("target_session_attrs", "read-write")
    params.setdefault("connect_timeout", str(max(1, round(connect_timeout_s))))
    options = str(params.get("options") or "")
    params["options"] = f"{options} -c synchronous_commit={synchronous_commit}".strip()
    params.setdefault("application_name", "certd")
    return make_conninfo(**{k: str(v) for k, v in params.items() if v is not None})


class PgConnections:
    """One autocommit session per thread, reopened after a failure."""

    def __init__(
        self, url: str, *, connect_timeout_s: float = 5.0, synchronous_commit: str = "on"
    ) -> None:
        """Set up (connects lazily, per thread).

        Args:
            url: the PostgreSQL URL (see ``conninfo_for``).
            connect_timeout_s: the timeout of each connection attempt, per host.
            synchronous_commit: the sessions' ``synchronous_commit``; ``on`` for the ledger.

        Raises:
            ConfigError: the URL is not valid.
        """
        self.url = url
        self._conninfo = conninfo_for(url, connect_timeout_s, synchronous_commit)
        self._local = threading.local()
        self._all: list[psycopg.Connection[tuple[object, ...]]] = []
        self._lock = threading.Lock()
        self._closed = False

    def session(self) -> psycopg.Connection[tuple[object, ...]]:
        """This thread's session, opened (or reopened) as needed.

        Raises:
            StoreError: the store is closed, or no host accepts a read-write session.
        """
        if self._closed:
            raise StoreError("expected an open store, got a closed one")
        conn: psycopg.Connection[tuple[object, ...]] | None = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed:
            return conn
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as e:
            raise StoreError(f"cannot connect to the PostgreSQL ledger: {e}") from e
        self._local.conn = conn
        with self._lock:
            self._all = [c for c in self._all if not c.closed] + [conn]
        return conn

    def drop(self) -> None:
        """Close this thread's session (after an error); the next call opens a new one."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    @contextmanager
    def cursor(self, what: str) -> Iterator[psycopg.Cursor[tuple[object, ...]]]:
        """A cursor on this thread's session; a failure becomes ``StoreError``.

        Args:
            what: what the caller does, for the error message (``"read entries"``).

        Raises:
            StoreError: the session failed (it is dropped: the next call reconnects).
        """
        conn = self.session()
        try:
            with conn.cursor() as cur:
                yield cur
        except psycopg.Error as e:
            if conn.closed or conn.broken or isinstance(e, psycopg.OperationalError):
                self.drop()
            raise StoreError(f"cannot {what}: {e}") from e

    @contextmanager
    def transaction(self, what: str) -> Iterator[psycopg.Cursor[tuple[object, ...]]]:
        """A cursor inside one transaction, committed when the block ends without error.

        Raises:
            StoreError: the session failed or the commit did; nothing was committed, or (the
                server died at the commit) it is unknown whether it was.
        """
        with self.cursor(what) as cur, cur.connection.transaction():
            yield cur

    def close(self) -> None:
        """Close every session. Idempotent."""
        with self._lock:
            self._closed = True
            for conn in self._all:
                conn.close()
            self._all.clear()
