"""The ledger store: one interface, its backends beside it, opened by URL through one factory.

Example:
    >>> from certd.ledger.store import open_store
    >>> store = open_store("sqlite://:memory:")
    >>> store.append([("k", b"entry")]), store.size()
    (0, 1)
    >>> store.close()

- ``interface``: ``LedgerStore`` (validation, limits, Merkle bookkeeping, the write hooks), its
  errors and types; ``reads``: its read side and read hooks.
- ``sqlite``, ``redis``, ``postgres`` (with ``postgres_conn``): the backends.
- ``factory``: ``open_store(url)`` by scheme (``sqlite://``, ``redis://``, ``postgresql://``).
"""

from __future__ import annotations

from certd.ledger.store.factory import (
    StoreOptions,
    open_store,
    register_scheme,
    scheme_of,
    schemes,
)
from certd.ledger.store.interface import (
    KEY_SEPARATOR,
    AppendConflictError,
    DuplicateKeyError,
    Entry,
    LedgerStore,
    Node,
    StoreLimits,
)

__all__ = [
    "AppendConflictError",
    "DuplicateKeyError",
    "Entry",
    "KEY_SEPARATOR",
    "LedgerStore",
    "Node",
    "StoreLimits",
    "StoreOptions",
    "open_store",
    "register_scheme",
    "scheme_of",
    "schemes",
]
