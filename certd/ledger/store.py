"""The ledger store interface: entries, complete Merkle nodes, checkpoints and lookup keys.

Example:
    >>> from certd.ledger.sqlite import SQLiteStore
    >>> store = SQLiteStore(":memory:")
    >>> store.append([("k1", b"entry one"), (None, b"entry two")])
    0
    >>> store.size(), store.find("k1"), store.entry(1)
    (2, 0, b'entry two')
    >>> store.close()

``LedgerStore`` does the Merkle bookkeeping and enforces limits; a backend (SQLite here,
Redis later) implements a few storage hooks. ``append`` is atomic: the entries, their keys,
every complete subtree node they complete and the new size are written in one step, or
nothing is. Keys are optional, unique, and let callers make appends idempotent
(``find(key)``).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TypeVar

from certd.errors import (
    InvalidInputError,
    LedgerError,
    LimitExceededError,
    NotFoundError,
    StoreError,
)
from certd.ledger.merkle import HASH_SIZE, CompactRange, NodeFn, leaf_hash, tree_root

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

_T = TypeVar("_T")
_DUMMY = bytes(HASH_SIZE)


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


class LedgerStore(ABC):
    """Base class of ledger stores: validation, limits and the Merkle bookkeeping.

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
            if keys:
                stored = self._find_keys(keys)
                if stored:
                    key = next(k for k in keys if k in stored)
                    raise DuplicateKeyError(key, stored[key])
            first = self._read_size()
            ids = CompactRange.frontier_ids(first)
            frontier = CompactRange(first, self.nodes_at(ids))
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

    # -- reads --------------------------------------------------------------------------------

    def size(self) -> int:
        """Return the number of committed entries.

        Raises:
            StoreError: the backend failed.

        Returns:
            The tree size.
        """
        return self._read_size()

    def unexplained(self, limit: int = 10) -> list[str]:
        """Stored state the tree does not explain (e.g. a row at ``idx >= size``).

        The audit fails naming each one, and the ledger refuses to start on a store that
        has any (the next append would collide with it).

        Args:
            limit: most items described.

        Raises:
            StoreError: the backend failed.

        Returns:
            One line per item, empty when the store holds exactly its tree.
        """
        return self._read_unexplained(self._read_size(), limit)

    def _check_range(self, start: int, end: int, limit: int, what: str) -> None:
        size = self._read_size()
        if not 0 <= start <= end <= size:
            raise NotFoundError(
                f"expected 0 <= start <= end <= tree size {size} for {what}, got [{start}, {end})"
            )
        if end - start > limit:
            raise LimitExceededError(f"expected at most {limit} {what} per read, got {end - start}")

    def entries(self, start: int, end: int) -> list[bytes]:
        """Read entries ``[start, end)``.

        Args:
            start: the first index.
            end: one past the last index, at most ``size()``.

        Raises:
            NotFoundError: the range is outside the tree.
            LimitExceededError: the range is longer than ``limits.max_read_entries``.
            StoreError: an entry inside the tree is missing (corrupt store) or the
                backend failed.

        Returns:
            The entry bytes, in order.
        """
        self._check_range(start, end, self.limits.max_read_entries, "entries")
        out = self._read_entries(start, end)
        for i, data in enumerate(out):
            if data is None:
                raise StoreError(f"expected entry {start + i} in the store, got none")
        return [d for d in out if d is not None]

    def entries_with_gaps(self, start: int, end: int) -> list[bytes | None]:
        """Read entries ``[start, end)`` for auditing, None where one is missing.

        Args:
            start: the first index.
            end: one past the last index, at most ``size()``.

        Raises:
            NotFoundError: the range is outside the tree.
            LimitExceededError: the range is longer than ``limits.max_read_entries``.
            StoreError: the backend failed.

        Returns:
            The entry bytes in order, None for each missing entry.
        """
        self._check_range(start, end, self.limits.max_read_entries, "entries")
        return self._read_entries(start, end)

    def entry(self, index: int) -> bytes:
        """Read one entry.

        Args:
            index: the entry index.

        Raises:
            NotFoundError: the index is outside the tree.
            StoreError: the entry is missing or the backend failed.

        Returns:
            The entry bytes.
        """
        if not 0 <= index < self._read_size():
            raise NotFoundError(f"expected an index below {self._read_size()}, got {index}")
        return self.entries(index, index + 1)[0]

    def nodes(self, level: int, start: int, end: int) -> list[bytes | None]:
        """Read stored complete nodes ``(level, start..end-1)`` for auditing.

        Args:
            level: the tree level (0 for leaf hashes).
            start: the first node index.
            end: one past the last node index; the nodes must be complete in ``size()``.

        Raises:
            NotFoundError: the range includes incomplete or non-existent nodes.
            LimitExceededError: the range is longer than ``limits.max_read_entries``.
            StoreError: the backend failed.

        Returns:
            The hashes, None where a node is missing.
        """
        complete = self._read_size() >> level
        if level < 0 or not 0 <= start <= end <= complete:
            raise NotFoundError(
                f"expected nodes within [0, {complete}) at level {level}, got [{start}, {end})"
            )
        if end - start > self.limits.max_read_entries:
            raise LimitExceededError(
                f"expected at most {self.limits.max_read_entries} nodes per read, got {end - start}"
            )
        return self._read_nodes(level, start, end)

    def node(self, level: int, index: int) -> bytes:
        """Read the hash of a complete subtree (``merkle.NodeFn``).

        Args:
            level: the level (0 for leaf hashes).
            index: the node index at that level.

        Raises:
            NotFoundError: the subtree is not complete in the current tree.
            StoreError: the node is missing (corrupt store) or the backend failed.

        Returns:
            The node hash.
        """
        (h,) = self.nodes(level, index, index + 1)
        if h is None:
            raise StoreError(f"expected node ({level}, {index}) in the store, got none")
        return h

    def nodes_at(
        self, coords: Sequence[tuple[int, int]], *, within: int | None = None
    ) -> list[bytes]:
        """Read complete nodes at arbitrary coordinates in one backend call.

        Args:
            coords: ``(level, index)`` pairs, each complete in the current tree.
            within: a tree size the caller knows is stored (a signed checkpoint's): the
                coordinates are checked against it instead of reading the size first.

        Raises:
            NotFoundError: a node is not complete in the current tree.
            StoreError: a node is missing (corrupt store) or the backend failed.

        Returns:
            The hashes, in the order of ``coords``.
        """
        size = self._read_size() if within is None else within
        for level, index in coords:
            if level < 0 or not 0 <= index < size >> level:
                raise NotFoundError(
                    f"expected a node within [0, {size >> max(level, 0)}) at level {level}, "
                    f"got {index}"
                )
        found = self._read_node_set(coords)
        out: list[bytes] = []
        for (level, index), h in zip(coords, found, strict=True):
            if h is None:
                raise StoreError(f"expected node ({level}, {index}) in the store, got none")
            out.append(h)
        return out

    def batched(self, compute: Callable[[NodeFn], _T]) -> _T:
        """Run a Merkle computation whose node reads are fetched in one backend call.

        ``compute`` runs twice: once with placeholder hashes to learn which nodes it reads
        (the proof and root algorithms read nodes by tree shape only), then with the real
        ones.

        Args:
            compute: a function of a ``merkle.NodeFn`` (``tree_root``, a proof builder).

        Raises:
            NotFoundError: a node it reads is not complete.
            StoreError: a node is missing or the backend failed.

        Returns:
            What ``compute`` returns with the stored nodes.
        """
        wanted: list[tuple[int, int]] = []

        def record(level: int, index: int) -> bytes:
            wanted.append((level, index))
            return _DUMMY

        compute(record)
        unique = list(dict.fromkeys(wanted))
        table = dict(zip(unique, self.nodes_at(unique), strict=True))
        return compute(lambda level, index: table[(level, index)])

    def root(self, size: int) -> bytes:
        """Compute the root of the first ``size`` entries from stored nodes.

        Args:
            size: the tree size, at most ``size()``.

        Raises:
            NotFoundError: ``size`` is beyond the stored tree.
            StoreError: a node is missing or the backend failed.

        Returns:
            The root hash.
        """
        current = self._read_size()
        if not 0 <= size <= current:
            raise NotFoundError(f"expected a tree size in [0, {current}], got {size}")
        return self.batched(lambda node_fn: tree_root(size, node_fn))

    def find(self, key: str) -> int | None:
        """Look up the entry appended with a key.

        Args:
            key: the lookup key.

        Raises:
            StoreError: the backend failed.

        Returns:
            The entry index, or None.
        """
        return self._find_keys([key]).get(key)

    def keyed(self, prefix: str, below: int) -> list[int] | None:
        """The indexes below ``below`` of entries appended with a key starting with ``prefix``.

        Lets a reader index one kind of entry (certificates, acceptance decisions) without
        reading every entry of the ledger.

        Args:
            prefix: the key prefix, e.g. ``"feasibility/"``.
            below: a stored tree size; entries at or past it are left out.

        Raises:
            StoreError: the backend failed.

        Returns:
            The indexes in ascending order, or None when the backend cannot list keys.
        """
        found = self._scan_keys(prefix)
        if found is None:
            return None
        return sorted({index for _, index in found if index < below})

    def entries_at(self, indexes: Sequence[int]) -> list[bytes]:
        """Read the entries at arbitrary indexes in one backend call.

        Args:
            indexes: entry indexes, each below the stored size.

        Raises:
            StoreError: an entry is missing (corrupt store) or the backend failed.

        Returns:
            The entries, in the order of ``indexes``.
        """
        if not indexes:
            return []
        got = self._read_entry_set(indexes)
        out: list[bytes] = []
        for i, data in zip(indexes, got, strict=True):
            if data is None:
                raise StoreError(f"expected entry {i} in the store, got none")
            out.append(data)
        return out

    def find_many(self, keys: Sequence[str]) -> dict[str, int]:
        """Look up several keys at once.

        Args:
            keys: the lookup keys.

        Raises:
            StoreError: the backend failed.

        Returns:
            The index of each key that is stored.
        """
        return self._find_keys(keys) if keys else {}

    def latest_checkpoint(self) -> tuple[int, str] | None:
        """Return the stored checkpoint with the largest tree size.

        Raises:
            StoreError: the backend failed.

        Returns:
            (size, signed note), or None when no checkpoint is stored.
        """
        return self._read_checkpoint(None)

    def checkpoint_at(self, size: int) -> str:
        """Return the signed checkpoint stored for a tree size.

        Args:
            size: the tree size.

        Raises:
            NotFoundError: no checkpoint is stored for that size.
            StoreError: the backend failed.

        Returns:
            The signed note.
        """
        found = self._read_checkpoint(size)
        if found is None:
            raise NotFoundError(f"expected a checkpoint at tree size {size}, got none")
        return found[1]
