"""Opening a ledger store by URL: one registry of schemes, the backends beside this module.

Example:
    >>> from certd.ledger.store import open_store, schemes
    >>> store = open_store("sqlite://:memory:")
    >>> store.size(), schemes()
    (0, ('postgres', 'postgresql', 'redis', 'rediss', 'sqlite', 'unix'))
    >>> store.close()

The URL forms (docs/operating-a-cluster.md, "The ledger store: one URL"):

- ``sqlite:///abs/path/ledger.sqlite``, ``sqlite://rel/path.sqlite``, ``sqlite://:memory:``, or a
  plain path with no scheme: the embedded SQLite ledger (``certd.ledger.store.sqlite``).
- ``redis://HOST:PORT/DB``, ``rediss://…``, ``unix:///path/redis.sock``: a shared Redis ledger
  (``certd.ledger.store.redis``).
- ``postgresql://HOST[,HOST2]/DB`` or ``postgres://…``: a shared PostgreSQL ledger
  (``certd.ledger.store.postgres``).

A new backend is a module beside these implementing the hooks of ``LedgerStore``
(``certd.ledger.store.interface``) and one ``register_scheme`` line below.
``certd serve`` and ``certd audit`` both open their store here. The backends
are imported when their scheme is opened, so SQLite needs neither redis nor psycopg.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from certd.errors import ConfigError
from certd.ledger.store.interface import LedgerStore, StoreLimits

__all__ = ["StoreOptions", "open_store", "register_scheme", "scheme_of", "schemes"]


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """The settings a backend may read; each reads only its own.

    Attributes:
        limits: the store limits (None: the defaults).
        sqlite_synchronous: SQLite's ``synchronous`` mode.
        redis_prefix: the Redis key prefix.
        redis_appendfsync: the Redis persistence policy required (``any`` for a reader).
        redis_timeout_s: the Redis socket timeout.
        postgres_schema: the PostgreSQL schema.
        postgres_connect_timeout_s: per host and attempt.
        postgres_require_sync_standby: refuse a primary that names no synchronous standby.
    """

    limits: StoreLimits | None = None
    sqlite_synchronous: str = "FULL"
    redis_prefix: str = "certd"
    redis_appendfsync: str = "always"
    redis_timeout_s: float = 10.0
    postgres_schema: str = "certd"
    postgres_connect_timeout_s: float = 5.0
    postgres_require_sync_standby: bool = False


Opener = Callable[[str, StoreOptions], LedgerStore]
"""Opens the store a URL names (the whole URL, scheme included)."""

_OPENERS: dict[str, Opener] = {}


def register_scheme(scheme: str, opener: Opener) -> None:
    """Make ``open_store`` open URLs of ``scheme`` with ``opener``.

    Raises:
        ConfigError: the scheme is already registered.
    """
    if scheme in _OPENERS:
        raise ConfigError(f"the ledger store scheme {scheme!r} is already registered")
    _OPENERS[scheme] = opener


def schemes() -> tuple[str, ...]:
    """The registered URL schemes, sorted."""
    return tuple(sorted(_OPENERS))


def scheme_of(url: str) -> str:
    """The scheme of a store URL; ``sqlite`` for a plain path."""
    scheme, sep, _ = url.partition("://")
    return scheme.lower() if sep else "sqlite"


def open_store(url: str, options: StoreOptions | None = None) -> LedgerStore:
    """Open the ledger store ``url`` names (a plain path is a SQLite file).

    Raises:
        ConfigError: the scheme is not registered, or the backend's settings are not valid.
        StoreError: the store cannot be opened.
    """
    scheme = scheme_of(url)
    opener = _OPENERS.get(scheme)
    if opener is None:
        raise ConfigError(f"expected a ledger store URL with a scheme in {schemes()}, got {url!r}")
    return opener(url, options or StoreOptions())


def _sqlite(url: str, options: StoreOptions) -> LedgerStore:
    from certd.ledger.store.sqlite import SQLiteStore

    _, sep, path = url.partition("://")
    path = path if sep else url
    if not path:
        raise ConfigError(f"expected a path in the SQLite store URL, got {url!r}")
    return SQLiteStore(path, synchronous=options.sqlite_synchronous, limits=options.limits)


def _redis(url: str, options: StoreOptions) -> LedgerStore:
    from certd.ledger.store.redis import RedisStore

    return RedisStore(
        url,
        prefix=options.redis_prefix,
        appendfsync=options.redis_appendfsync,
        limits=options.limits,
        socket_timeout_s=options.redis_timeout_s,
    )


def _postgres(url: str, options: StoreOptions) -> LedgerStore:
    from certd.ledger.store.postgres import PostgresStore

    return PostgresStore(
        url,
        schema=options.postgres_schema,
        limits=options.limits,
        connect_timeout_s=options.postgres_connect_timeout_s,
        require_sync_standby=options.postgres_require_sync_standby,
    )


for _scheme, _opener in (
    ("sqlite", _sqlite),
    ("redis", _redis),
    ("rediss", _redis),
    ("unix", _redis),
    ("postgresql", _postgres),
    ("postgres", _postgres),
):
    register_scheme(_scheme, _opener)
