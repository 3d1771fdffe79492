"""What a ledger store backend implements: the storage hooks, the limits, the store's errors.

Example:
    >>> StoreLimits().max_batch_entries, KEY_SEPARATOR == "\x1e"
    (100000, True)

``certd.ledger.store.LedgerStore`` builds on this (reads in ``certd.ledger.storereads``,
validated atomic appends in ``certd.ledger.store``); import the names from there.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from certd.errors import LedgerError, StoreError

__all__ = [
    "AppendConflictError",
    "DuplicateKeyError",
    "Entry",
    "KEY_SEPARATOR",
    "Node",
    "StoreHooks",
    "StoreLimits",
]

Entry = tuple[str | None, bytes]
"""An entry to append: (optional lookup key, entry bytes)."""

Node = tuple[int, int, bytes]
"""A complete Merkle node: (level, index, hash)."""


class DuplicateKeyError(LedgerError):
    """An appended key is already in the ledger, or twice in one append.

    Attributes:
        key: the key.
        index: the index of the entry already holding it, or None when the duplicate is
            inside the same append.
    """

    def __init__(self, key: str, index: int | None) -> None:
        where = "twice in one append" if index is None else f"already at index {index}"
        super().__init__(f"expected a new key, got {key!r} {where}")
        self.key = key
        self.index = index


class AppendConflictError(StoreError):
    """Another writer appended first: the stored size is no longer the one the append read.

    Nothing was written; a retry starts from the new size. Only stores shared by several
    processes (``LedgerStore.shared``) raise it.

    Attributes:
        size: the stored size the append found.
    """

    def __init__(self, expected: int, size: int) -> None:
        super().__init__(f"expected tree size {expected} at commit, got {size}: another writer")
        self.size = size


KEY_SEPARATOR = "\x1e"
"""Joins several unique keys of one entry in a shared store (``RedisStore``): each part is
then unique and findable on its own. The embedded SQLite store treats a key as one string."""


@dataclass(frozen=True)
class StoreLimits:
    """Limits a store enforces.

    Attributes:
        max_entry_bytes: largest entry, in bytes.
        max_key_chars: longest lookup key, in characters.
        max_batch_entries: most entries in one append.
        max_read_entries: most entries one ``entries(start, end)`` call returns.
    """

    max_entry_bytes: int = 1 << 20
    max_key_chars: int = 512
    max_batch_entries: int = 100_000
    max_read_entries: int = 10_000


class StoreHooks(ABC):
    """The storage hooks of a ledger store and its limits (see ``LedgerStore``).

    Subclasses implement the ``_read_*``/``_write_*`` hooks and ``close``; they must be
    safe to call from several threads. Appends through one store object are serialized
    here; a backend shared by several processes must make ``_write_batch`` fail when the
    stored size is no longer ``first`` (compare-and-set), and sets ``shared``.
    """

    shared: bool = False
    """True when other processes may append to the same backend (the Ledger then re-reads
    the latest checkpoint before each commit and retries appends that lost a race)."""

    def __init__(self, limits: StoreLimits | None = None) -> None:
        """Set the limits.

        Args:
            limits: the limits, or None for the defaults.
        """
        self.limits = limits or StoreLimits()
        self._append_lock = threading.Lock()

    # -- hooks --------------------------------------------------------------------------------

    @abstractmethod
    def _read_size(self) -> int:
        """Return the committed number of entries."""

    @abstractmethod
    def _read_entries(self, start: int, end: int) -> list[bytes | None]:
        """Return entries ``[start, end)``, None for any that is missing."""

    @abstractmethod
    def _read_nodes(self, level: int, start: int, end: int) -> list[bytes | None]:
        """Return nodes ``(level, start..end-1)``, None for any that is missing."""

    def _read_node_set(self, coords: Sequence[tuple[int, int]]) -> list[bytes | None]:
        """Return the nodes at ``(level, index)`` coordinates, None for any that is missing.

        The default reads them one by one; a networked backend overrides it with one round trip.
        """
        return [self._read_nodes(level, index, index + 1)[0] for level, index in coords]

    @abstractmethod
    def _find_keys(self, keys: Sequence[str]) -> dict[str, int]:
        """Return the index of each of ``keys`` that is stored."""

    def _scan_keys(self, prefix: str) -> list[tuple[str, int]] | None:
        """Return every stored (key, index) whose key starts with ``prefix``.

        None (the default) means the backend cannot list keys; callers then scan entries.
        """
        return None

    def _read_entry_set(self, indexes: Sequence[int]) -> list[bytes | None]:
        """Return the entries at ``indexes``, None for any that is missing.

        The default reads them one by one; backends override it with one query.
        """
        return [self._read_entries(i, i + 1)[0] for i in indexes]

    @abstractmethod
    def _write_batch(self, first: int, entries: Sequence[Entry], nodes: Sequence[Node]) -> None:
        """Atomically store entries from index ``first``, their nodes and the new size.

        Must raise StoreError, writing nothing, if the stored size is not ``first``, and
        DuplicateKeyError if a key is already stored.
        """

    @abstractmethod
    def _write_checkpoint(self, size: int, signed_note: str) -> None:
        """Store (or replace) the signed checkpoint for ``size``."""

    @abstractmethod
    def _read_checkpoint(self, size: int | None) -> tuple[int, str] | None:
        """Return the checkpoint for ``size``, or the largest one when ``size`` is None."""

    def _read_unexplained(self, size: int, limit: int) -> list[str]:
        """Describe up to ``limit`` stored items the tree of ``size`` does not explain.

        Entries at an index >= size, nodes over leaves >= size, checkpoints for a size
        beyond it. The default finds none; backends that can look override it.
        """
        return []

    def _read_garbled(self, size: int, limit: int) -> list[str]:
        """Describe up to ``limit`` damaged rows inside the tree of ``size``, cheaply.

        Rows of the wrong type, and fewer entry or node rows than the tree needs (without
        reading them). The default finds none; backends that can count override it.
        """
        return []

    def writer_lock(self) -> AbstractContextManager[None]:
        """Serialise commits with other processes sharing the backend (a no-op here).

        Correctness never depends on it (appends are compare-and-set); a shared backend
        uses it so replicas queue for the append instead of redoing lost races.

        Returns:
            A context manager held around one commit.
        """
        return nullcontext()

    @abstractmethod
    def close(self) -> None:
        """Release the backend's resources. Further calls may fail."""
