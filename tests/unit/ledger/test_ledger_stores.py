"""One store factory by URL scheme: each form opens its backend, unknown schemes are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from certd.errors import ConfigError
from certd.ledger.store import StoreOptions, open_store, register_scheme, scheme_of
from certd.ledger.store.redis import RedisStore
from certd.ledger.store.sqlite import SQLiteStore


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        ("certd-data/ledger.sqlite", "sqlite"),
        ("/var/lib/certd/ledger.sqlite", "sqlite"),
        ("sqlite:///var/lib/certd/ledger.sqlite", "sqlite"),
        ("redis://127.0.0.1:6379/0", "redis"),
        ("REDISS://h/0", "rediss"),
        ("postgresql://db1,db2/certd", "postgresql"),
    ],
)
def test_the_scheme_names_the_backend(url: str, scheme: str) -> None:
    assert scheme_of(url) == scheme


def test_a_plain_path_and_a_sqlite_url_open_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    first = open_store(str(path))
    assert isinstance(first, SQLiteStore)
    first.append([("k", b"entry")])
    first.close()
    again = open_store(f"sqlite://{path}")  # sqlite:///abs/path
    try:
        assert again.find("k") == 0 and again.entry(0) == b"entry"
    finally:
        again.close()


def test_options_reach_the_backend(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="synchronous"):
        open_store(str(tmp_path / "x.sqlite"), StoreOptions(sqlite_synchronous="SOMETIMES"))


@pytest.mark.parametrize("url", ["ftp://host/ledger", "sqlite://"])
def test_an_unknown_scheme_or_an_empty_path_is_refused(url: str) -> None:
    with pytest.raises(ConfigError):
        open_store(url)


def test_a_scheme_is_registered_once() -> None:
    with pytest.raises(ConfigError, match="already registered"):
        register_scheme("sqlite", lambda url, options: open_store(":memory:"))


def test_a_redis_url_opens_redis(redis_server: object) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    store = open_store(url, StoreOptions(redis_prefix="stores-test"))
    try:
        assert isinstance(store, RedisStore) and store.size() == 0
    finally:
        store.close()


def test_the_store_interface_is_one_module_with_the_backends_beside_it() -> None:
    """``LedgerStore``, its errors and types are ``certd.ledger.store.interface``'s; each
    backend is a module of ``certd.ledger.store`` subclassing it, opened by the one factory."""
    import importlib

    from certd.ledger import store

    interface = "certd.ledger.store.interface"
    for name in ("LedgerStore", "DuplicateKeyError", "AppendConflictError", "StoreLimits"):
        assert getattr(store, name).__module__ == interface, name
    for module, cls in (
        ("sqlite", "SQLiteStore"),
        ("redis", "RedisStore"),
        ("postgres", "PostgresStore"),
    ):
        backend = getattr(importlib.import_module(f"certd.ledger.store.{module}"), cls)
        assert issubclass(backend, store.LedgerStore), cls
    assert {"sqlite", "redis", "postgresql"} <= set(store.schemes())
