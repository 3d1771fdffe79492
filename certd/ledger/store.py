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

from collections.abc import Sequence

from certd.errors import InvalidInputError, LimitExceededError
from certd.ledger.storebase import (
    KEY_SEPARATOR,
    AppendConflictError,
    DuplicateKeyError,
    Entry,
    Node,
    StoreLimits,
)
from certd.ledger.storereads import StoreReads
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


class LedgerStore(StoreReads):
    """Base class of ledger stores: validation, limits and the Merkle bookkeeping.

    Subclasses implement the ``_read_*``/``_write_*`` hooks of ``StoreHooks`` and ``close``;
    they must be safe to call from several threads. Appends through one store object are
    serialized here; a backend shared by several processes must make ``_write_batch`` fail
    when the stored size is no longer ``first`` (compare-and-set), and sets ``shared``.
    """

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
