"""The ledger store interface: what every backend implements and every caller gets.

Example:
    >>> from certd.ledger.store import open_store
    >>> store = open_store("sqlite://:memory:")
    >>> store.append([("k1", b"entry one"), (None, b"entry two")])
    0
    >>> store.size(), store.find("k1"), store.entry(1)
    (2, 0, b'entry two')
    >>> store.close()

``LedgerStore`` holds entries, complete Merkle nodes, checkpoints and lookup keys. It does the
Merkle bookkeeping and enforces limits; a backend (``sqlite``, ``redis``, ``postgres`` beside
this module, opened by URL through ``certd.ledger.store.factory``) implements the storage
hooks: the write hooks below (``_write_batch``, ``_write_checkpoint``, ``writer_lock``,
``close``) and the read hooks of ``certd.ledger.store.reads`` (``_read_size``,
``_read_entries``, ``_read_nodes``, ``_find_keys``, ``_read_checkpoint``, and optional
batched/diagnostic ones with defaults). ``append`` is atomic: the entries, their keys, every
complete subtree node they complete and the new size are written in one step, or nothing is.
Keys are optional, unique, and let callers make appends idempotent (``find(key)``).
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from certd.errors import InvalidInputError, LedgerError, LimitExceededError, StoreError
from certd.ledger.store.reads import StoreReads
from certd.tlog import CompactRange, leaf_hash

__all__ = [
    "AppendConflictError",
    "DuplicateKeyError",
    "Entry",
    "KEY_SEPARATOR",
    "LedgerStore",
    "Node",
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


class LedgerStore(StoreReads):
    """Base class of ledger stores: validation, limits, the Merkle bookkeeping, the hooks.

    Subclasses implement the ``_write_*`` hooks here, the ``_read_*`` hooks of ``StoreReads``
    and ``close``; they must be safe to call from several threads. Appends through one store
    object are serialized here; a backend shared by several processes must make
    ``_write_batch`` fail when the stored size is no longer ``first`` (compare-and-set), and
    sets ``shared``.
    """

    limits: StoreLimits

    shared: bool = False
    """True when other processes may append to the same backend (the Ledger then re-reads
    the latest checkpoint before each commit and retries appends that lost a race)."""

    write_refuses_stored_keys: bool = False
    """True when ``_write_batch`` itself refuses (``DuplicateKeyError`` with the index, nothing
    written) a key stored already, in the same step as the write: ``append`` then skips its
    own look-up of the keys first (a round trip to a networked backend)."""

    def __init__(self, limits: StoreLimits | None = None) -> None:
        """Set the limits.

        Args:
            limits: the limits, or None for the defaults.
        """
        self.limits = limits or StoreLimits()
        self._append_lock = threading.Lock()

    # -- write hooks --------------------------------------------------------------------------

    @abstractmethod
    def _write_batch(self, first: int, entries: Sequence[Entry], nodes: Sequence[Node]) -> None:
        """Atomically store entries from index ``first``, their nodes and the new size.

        Must raise StoreError, writing nothing, if the stored size is not ``first``, and
        DuplicateKeyError if a key is already stored.
        """

    @abstractmethod
    def _write_checkpoint(self, size: int, signed_note: str) -> None:
        """Store (or replace) the signed checkpoint for ``size``."""

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

    # -- validation ---------------------------------------------------------------------------

    def validate_entry(self, key: str | None, data: bytes) -> None:
        """Check one entry against the limits without storing it.

        Args:
            key: the optional lookup key.
            data: the entry bytes.

        Raises:
            InvalidInputError: the key or data has the wrong type, or the key is empty.
            LimitExceededError: the entry or key is over a limit.
        """
        if not isinstance(data, bytes):
            raise InvalidInputError(f"expected entry bytes, got {type(data).__name__}")
        if len(data) > self.limits.max_entry_bytes:
            raise LimitExceededError(
                f"expected an entry of at most {self.limits.max_entry_bytes} bytes, got {len(data)}"
            )
        if key is None:
            return
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"expected a non-empty string key or None, got {key!r:.60}")
        if len(key) > self.limits.max_key_chars:
            raise LimitExceededError(
                f"expected a key of at most {self.limits.max_key_chars} characters, got {len(key)}"
            )

    # -- writes -------------------------------------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> int:
        """Append entries atomically; see ``append_nodes``.

        Returns:
            The index of the first appended entry.
        """
        return self.append_nodes(entries)[0]

    def append_nodes(self, entries: Sequence[Entry]) -> tuple[int, list[Node]]:
        """Append entries atomically, and return the complete nodes the append created.

        The nodes are what the store wrote (they never change once written), so a caller
        may cache them: proofs of the new entries then need no read back.

        Args:
            entries: ``(key, data)`` pairs; ``key`` may be None.

        Raises:
            InvalidInputError: no entries, or an entry is malformed.
            LimitExceededError: an entry, key or the batch is over a limit.
            DuplicateKeyError: a key is stored already or repeated in ``entries``.
            StoreError: the backend failed; nothing was written.

        Returns:
            (the index of the first appended entry, the new ``(level, index, hash)`` nodes).
        """
        if not entries:
            raise InvalidInputError("expected at least one entry to append, got none")
        if len(entries) > self.limits.max_batch_entries:
            raise LimitExceededError(
                f"expected at most {self.limits.max_batch_entries} entries in one append, "
                f"got {len(entries)}"
            )
        keys: list[str] = []
        seen: set[str] = set()
        for key, data in entries:
            self.validate_entry(key, data)
            if key is not None:
                if key in seen:
                    raise DuplicateKeyError(key, None)
                seen.add(key)
                keys.append(key)
        with self._append_lock:
            if keys and not self.write_refuses_stored_keys:
                stored = self._find_keys(keys)
                if stored:
                    key = next(k for k in keys if k in stored)
                    raise DuplicateKeyError(key, stored[key])
            first = self._read_size()
            ids = CompactRange.frontier_ids(first)
            frontier = CompactRange(first, self.nodes_at(ids, within=first))
            nodes: list[Node] = []
            for _, data in entries:
                nodes.extend(frontier.append(leaf_hash(data)))
            self._write_batch(first, entries, nodes)
            return first, nodes

    def put_checkpoint(self, size: int, signed_note: str) -> None:
        """Store the signed checkpoint for a tree size (replacing one already there).

        Args:
            size: the checkpoint's tree size, at most ``size()``.
            signed_note: the signed checkpoint note.

        Raises:
            InvalidInputError: the size is beyond the stored tree.
            StoreError: the backend failed.
        """
        current = self._read_size()
        if not 0 <= size <= current:
            raise InvalidInputError(f"expected a checkpoint size in [0, {current}], got {size}")
        self._write_checkpoint(size, signed_note)
