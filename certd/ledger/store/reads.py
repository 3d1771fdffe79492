"""Reading a ledger store: entries, complete nodes, roots, keys and checkpoints, within limits.

Example:
    >>> from certd.ledger.store import open_store
    >>> store = open_store("sqlite://:memory:")
    >>> store.append([("k", b"a"), (None, b"b")])
    0
    >>> store.entries(0, 2), store.find("k"), store.root(2) == store.root(2)
    ([b'a', b'b'], 0, True)

The read side of ``certd.ledger.store.interface.LedgerStore`` and the read hooks a backend
implements for it (the write hooks are declared there).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from certd.errors import LimitExceededError, NotFoundError, StoreDamageError
from certd.tlog import HASH_SIZE, NodeFn, tree_root

__all__ = ["StoreReads"]

_T = TypeVar("_T")
_DUMMY = bytes(HASH_SIZE)


class _ReadLimits(Protocol):
    """The limit reads enforce (``StoreLimits`` has it)."""

    @property
    def max_read_entries(self) -> int:
        """Most entries (or nodes) one read returns."""
        ...


class StoreReads(ABC):
    """The read side of ``LedgerStore`` and its read hooks (thread-safe as the hooks are)."""

    limits: _ReadLimits

    # -- read hooks ---------------------------------------------------------------------------

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

    def _read_node_ranges(self, ranges: Sequence[tuple[int, int, int]]) -> list[list[bytes | None]]:
        """Return the nodes of each ``(level, start, end)`` range, None for any that is missing.

        The default reads the ranges one by one; a networked backend overrides it with one
        round trip.
        """
        return [self._read_nodes(level, start, end) for level, start, end in ranges]

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

    def garbled(self, size: int, limit: int = 10) -> list[str]:
        """Damaged rows inside the tree of ``size`` that a backend finds without reading
        every row: a value of the wrong type, fewer entry or node rows than the tree needs.

        Args:
            size: the tree size.
            limit: most items described.

        Raises:
            StoreError: the backend failed.

        Returns:
            One line per item, empty when none is found.
        """
        return self._read_garbled(size, limit)

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
            StoreDamageError: an entry inside the tree is missing (corrupt store).
            StoreError: the backend failed.

        Returns:
            The entry bytes, in order.
        """
        self._check_range(start, end, self.limits.max_read_entries, "entries")
        out = self._read_entries(start, end)
        for i, data in enumerate(out):
            if data is None:
                raise StoreDamageError(f"expected entry {start + i} in the store, got none")
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
            StoreDamageError: the entry is missing.
            StoreError: the backend failed.

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

    def node_ranges(
        self, ranges: Sequence[tuple[int, int, int]], *, within: int
    ) -> list[list[bytes | None]]:
        """Read the stored nodes of several ``(level, start, end)`` ranges for auditing, in one
        backend call where the backend can.

        Args:
            ranges: the ranges, each complete in a tree of ``within`` entries.
            within: a tree size the caller knows is stored (it read the entries up to it).

        Raises:
            NotFoundError: a range includes nodes not complete in ``within`` entries.
            LimitExceededError: a range is longer than ``limits.max_read_entries``.
            StoreError: the backend failed.

        Returns:
            Per range, the hashes, None where a node is missing.
        """
        for level, start, end in ranges:
            complete = within >> level if level >= 0 else -1
            if not 0 <= start <= end <= complete:
                raise NotFoundError(
                    f"expected nodes within [0, {complete}) at level {level}, got [{start}, {end})"
                )
            if end - start > self.limits.max_read_entries:
                raise LimitExceededError(
                    f"expected at most {self.limits.max_read_entries} nodes per read, "
                    f"got {end - start}"
                )
        return self._read_node_ranges(ranges)

    def node(self, level: int, index: int) -> bytes:
        """Read the hash of a complete subtree (``merkle.NodeFn``).

        Args:
            level: the level (0 for leaf hashes).
            index: the node index at that level.

        Raises:
            NotFoundError: the subtree is not complete in the current tree.
            StoreDamageError: the node is missing (corrupt store).
            StoreError: the backend failed.

        Returns:
            The node hash.
        """
        (h,) = self.nodes(level, index, index + 1)
        if h is None:
            raise StoreDamageError(f"expected node ({level}, {index}) in the store, got none")
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
            StoreDamageError: a node is missing (corrupt store).
            StoreError: the backend failed.

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
                raise StoreDamageError(f"expected node ({level}, {index}) in the store, got none")
            out.append(h)
        return out

    def batched(self, compute: Callable[[NodeFn], _T], *, within: int | None = None) -> _T:
        """Run a Merkle computation whose node reads are fetched in one backend call.

        ``compute`` runs twice: once with placeholder hashes to learn which nodes it reads
        (the proof and root algorithms read nodes by tree shape only), then with the real
        ones.

        Args:
            compute: a function of a ``merkle.NodeFn`` (``tree_root``, a proof builder).
            within: a tree size the caller knows is stored, as for ``nodes_at``.

        Raises:
            NotFoundError: a node it reads is not complete.
            StoreDamageError: a node is missing.
            StoreError: the backend failed.

        Returns:
            What ``compute`` returns with the stored nodes.
        """
        wanted: list[tuple[int, int]] = []

        def record(level: int, index: int) -> bytes:
            wanted.append((level, index))
            return _DUMMY

        compute(record)
        unique = list(dict.fromkeys(wanted))
        table = dict(zip(unique, self.nodes_at(unique, within=within), strict=True))
        return compute(lambda level, index: table[(level, index)])

    def root(self, size: int) -> bytes:
        """Compute the root of the first ``size`` entries from stored nodes.

        Args:
            size: the tree size, at most ``size()``.

        Raises:
            NotFoundError: ``size`` is beyond the stored tree.
            StoreDamageError: a node is missing.
            StoreError: the backend failed.

        Returns:
            The root hash.
        """
        current = self._read_size()
        if not 0 <= size <= current:
            raise NotFoundError(f"expected a tree size in [0, {current}], got {size}")
        # the nodes of a tree of ``size`` are complete in it, and it is stored: no second read
        return self.batched(lambda node_fn: tree_root(size, node_fn), within=size)

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
            StoreDamageError: an entry is missing (corrupt store).
            StoreError: the backend failed.

        Returns:
            The entries, in the order of ``indexes``.
        """
        if not indexes:
            return []
        got = self._read_entry_set(indexes)
        out: list[bytes] = []
        for i, data in zip(indexes, got, strict=True):
            if data is None:
                raise StoreDamageError(f"expected entry {i} in the store, got none")
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
