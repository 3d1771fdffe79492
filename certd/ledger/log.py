"""The ledger: durable appends with group commit, and checkpoints it never signs inconsistently.

Example:
    >>> from certd.signing.keys import SigningKey
    >>> from certd.ledger.log import Ledger
    >>> from certd.ledger.store.sqlite import SQLiteStore
    >>> key = SigningKey.generate("certd.example/log")
    >>> with Ledger(SQLiteStore(":memory:"), key, "certd.example/log") as ledger:
    ...     ledger.append([("k", b"entry")])
    ...     ledger.checkpoint().checkpoint.size
    [0]
    1

The ledger is three parts behind one face:

* ``certd.ledger.groupcommit`` — the committer thread: ``submit``/``append_many``/``append``
  from any thread enqueue requests, one store transaction per batch, futures resolved only
  once the entries are durable and covered by a stored signed checkpoint;
* ``certd.ledger.checkpointer`` — never signs a checkpoint inconsistent with one signed or
  adopted before (c2sp.org/tlog-checkpoint); fail-stop on a consistency failure (appends
  refused, reads keep working); adopts other replicas' checkpoints on a shared store and
  remembers the latest in ``checkpoint_file``, so a restarted replica never signs a fork;
* ``certd.ledger.proofs`` — inclusion and consistency proofs within the signed tree, through
  a bounded cache of the nodes appends wrote.

Shared stores (``LedgerStore.shared``, e.g. Redis behind several replicas): readers adopt
newer checkpoints at most every ``refresh_interval_s``; see the two modules for appends.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType

from certd.errors import CertdError, NotFoundError
from certd.ledger.checkpointer import Checkpointer
from certd.ledger.groupcommit import Committer, GroupCommitConfig
from certd.ledger.proofs import ProofReader
from certd.ledger.store import Entry, LedgerStore
from certd.signing.keys import SigningKey, VerifierKey
from certd.tlog import SignedCheckpoint

__all__ = ["GroupCommitConfig", "Ledger"]


class Ledger:
    """An append-only, signed Merkle log over a ``LedgerStore``.

    The ledger owns the store: ``close`` flushes pending appends, then closes it.
    """

    def __init__(
        self,
        store: LedgerStore,
        signer: SigningKey,
        origin: str,
        *,
        config: GroupCommitConfig | None = None,
        checkpoint_file: Path | None = None,
        refresh_interval_s: float = 0.05,
        previous_keys: Sequence[VerifierKey] = (),
        verified_mark: Path | None = None,
    ) -> None:
        """Open the ledger, check the store against its latest checkpoint, start committing.

        If the store holds entries past the latest checkpoint (a crash between append and
        checkpoint), a checkpoint covering them is signed now, after the same consistency
        checks. The ledger owns the store once constructed; if construction raises, the
        store is left open for the caller to close.

        Args:
            store: the store.
            signer: the log key that signs checkpoints.
            origin: the checkpoint origin line (usually the key name).
            config: group-commit settings, or None for the defaults.
            checkpoint_file: where to remember the latest checkpoint on local disk (for a
                shared store), or None.
            refresh_interval_s: for a shared store, how often readers look for a newer
                checkpoint stored by another replica.
            previous_keys: log keys used before a key rotation; checkpoints stored under
                them are accepted (new ones are signed with ``signer``).
            verified_mark: the file recording how far the store was proven at start-up
                (``certd.ledger.startup_check``); None re-reads every row at each start.

        Raises:
            SigningError: the latest stored checkpoint does not verify with ``signer``.
            LedgerError: its origin differs from ``origin``.
            ConsistencyError: the stored tree does not match the latest checkpoint, or the
                store holds anything its tree does not explain (start-up refused).
            StoreError: the store failed.
        """
        self._store = store
        self._checkpoints = Checkpointer(
            store,
            signer,
            origin,
            checkpoint_file=checkpoint_file,
            refresh_interval_s=refresh_interval_s,
            previous_keys=previous_keys,
            verified_mark=verified_mark,
        )
        self._proofs = ProofReader(store, self.size)
        self._committer = Committer(
            store, self._checkpoints, config or GroupCommitConfig(), self._proofs.cache_nodes
        )
        self._checkpoints.start()
        self._committer.start()

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Commit every request submitted so far, stop the committer, close the store.

        Idempotent. Requests submitted after ``close`` began raise LedgerError.
        """
        if self._committer.close():
            self._store.close()

    # -- appends ------------------------------------------------------------------------------

    def append_many(self, items: Sequence[Entry]) -> Future[list[int]]:
        """Queue entries to be appended together, in order, in one transaction.

        Args:
            items: ``(key, data)`` pairs; ``key`` may be None.

        Raises:
            InvalidInputError: no items, or an item is malformed.
            LimitExceededError: an item is over a store limit.
            ConsistencyError: the ledger stopped after a consistency failure.
            LedgerError: the ledger is closed.

        Returns:
            A future of the entries' indexes, resolved once they are durable and covered
            by a stored signed checkpoint; it fails with DuplicateKeyError, StoreError or
            ConsistencyError. Cancelling it works only until the committer takes the
            request; after that the entries are committed regardless.
        """
        return self._committer.append_many(items)

    def submit(self, key: str | None, entry: bytes) -> Future[int]:
        """Queue one entry.

        Args:
            key: the optional lookup key.
            entry: the entry bytes.

        Raises:
            InvalidInputError: the entry is malformed.
            LimitExceededError: the entry is over a store limit.
            ConsistencyError: the ledger stopped after a consistency failure.
            LedgerError: the ledger is closed.

        Returns:
            A future of the entry's index (see ``append_many``).
        """
        return self._committer.submit(key, entry)

    def append(self, items: Sequence[Entry], timeout_s: float | None = None) -> list[int]:
        """Append entries and wait until they are durable and checkpointed.

        Args:
            items: ``(key, data)`` pairs.
            timeout_s: how long to wait, or None to wait as long as it takes.

        Raises:
            InvalidInputError: no items, or an item is malformed.
            LimitExceededError: an item is over a store limit.
            DuplicateKeyError: a key is already in the ledger or repeated.
            ConsistencyError: the store is inconsistent with the latest checkpoint.
            StoreError: the store failed; nothing was acknowledged.
            LedgerError: the ledger is closed.
            TimeoutError: ``timeout_s`` passed (the entries may still be committed).

        Returns:
            The entries' indexes.
        """
        return self.append_many(items).result(timeout_s)

    # -- reads --------------------------------------------------------------------------------

    def checkpoint(self) -> SignedCheckpoint:
        """Return the latest signed checkpoint.

        Returns:
            The signed note and its parsed checkpoint.
        """
        return self._checkpoints.checkpoint()

    def refresh(self) -> SignedCheckpoint:
        """Adopt the newest checkpoint in a shared store now, without waiting for the interval.

        A reader that missed something (another replica's certificate) calls this before
        answering NOT_FOUND: every acknowledged entry is covered by a checkpoint stored
        before its acknowledgement, so after a refresh the ledger's size covers it.

        Returns:
            The latest signed checkpoint.
        """
        return self._checkpoints.refresh()

    @property
    def pending_requests(self) -> int:
        """Append requests queued for the committer (a queue depth)."""
        return self._committer.pending_requests

    @property
    def checkpoint_time(self) -> float:
        """POSIX time this ledger signed or adopted its latest checkpoint."""
        return self._checkpoints.latest_at

    def health(self) -> str | None:
        """Why the ledger cannot take appends, or None when it can.

        Returns:
            A reason (fail-stop after a consistency failure, a dead committer, a store
            that does not answer, a shared store whose newer checkpoint this replica
            cannot verify), or None.
        """
        failed = self._checkpoints.failed
        if failed is not None:
            return f"ledger stopped: {failed}"
        if self._committer.closed:
            return "ledger closed"
        if not self._committer.alive:
            return "ledger committer thread is not running"
        try:
            self._store.size()
        except CertdError as e:
            return f"ledger store: {e}"
        if self._store.shared:  # another writer's newer checkpoint must verify here too
            try:
                self._checkpoints.refresh_latest()
            except CertdError as e:
                return f"ledger cannot verify the shared log's latest checkpoint: {e}"
        return None

    def cover(self, index: int) -> SignedCheckpoint:
        """Return a signed checkpoint that covers an entry, signing one if needed.

        On a shared store another replica may have appended ``index`` and not yet signed a
        checkpoint for it; this signs one (after the usual consistency checks).

        Args:
            index: the entry index.

        Raises:
            NotFoundError: the entry is not stored.
            ConsistencyError: the store is inconsistent with the latest checkpoint.
            StoreError: the store failed.

        Returns:
            A checkpoint whose size is above ``index``.
        """
        return self._checkpoints.cover(index)

    def size(self) -> int:
        """Return the tree size of the latest signed checkpoint.

        Every entry below it is durable and covered by a signed checkpoint; the store may
        briefly hold more while a batch is being checkpointed.

        Returns:
            The number of acknowledged entries.
        """
        return self.checkpoint().checkpoint.size

    def checkpoint_at(self, size: int) -> SignedCheckpoint:
        """Return the stored signed checkpoint for a tree size.

        Only sizes at which a batch was committed have one.

        Args:
            size: the tree size.

        Raises:
            NotFoundError: no checkpoint was signed at that size.
            SigningError: the stored note does not verify with the log key.
            LedgerError: the stored note is not a checkpoint of this log at ``size``.
            StoreError: the store failed.

        Returns:
            The signed note and its parsed checkpoint.
        """
        return self._checkpoints.checkpoint_at(size)

    def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        """Build the inclusion proof of an entry in a signed tree size.

        Args:
            index: the entry index.
            tree_size: a tree size at most the latest checkpoint's.

        Raises:
            NotFoundError: ``tree_size`` is beyond the latest checkpoint.
            ProofError: ``index`` is not below ``tree_size``.
            StoreError: the store failed.

        Returns:
            The audit path.
        """
        return self._proofs.inclusion_proof(index, tree_size)

    def prove(self, index: int) -> tuple[SignedCheckpoint, list[bytes]]:
        """Prove an entry's inclusion in the latest signed checkpoint.

        Args:
            index: the entry index.

        Raises:
            ProofError: the entry is not covered by the latest checkpoint.
            StoreError: the store failed.

        Returns:
            (the checkpoint, the audit path to its root).
        """
        latest = self.checkpoint()
        return latest, self._proofs.inclusion_proof_unchecked(index, latest.checkpoint.size)

    def prove_many(self, indexes: Sequence[int]) -> tuple[SignedCheckpoint, list[list[bytes]]]:
        """Prove entries' inclusion in the latest signed checkpoint, all in the same one.

        Args:
            indexes: the entry indexes.

        Raises:
            NotFoundError: an entry is not below the checkpoint's tree size.
            StoreError: the store failed.

        Returns:
            (the checkpoint, one audit path to its root per index, in order).
        """
        latest = self.checkpoint()
        size = latest.checkpoint.size
        for index in indexes:
            if not 0 <= index < size:
                raise NotFoundError(f"leaf index {index} is not below tree size {size}")
        return latest, self._proofs.inclusion_proofs_unchecked(indexes, size)

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        """Build the consistency proof between two signed tree sizes.

        Args:
            size1: the older size.
            size2: the newer size, at most the latest checkpoint's.

        Raises:
            NotFoundError: ``size2`` is beyond the latest checkpoint.
            ProofError: ``size1 > size2`` or a size is negative.
            StoreError: the store failed.

        Returns:
            The proof hashes.
        """
        return self._proofs.consistency_proof(size1, size2)

    def entries(self, start: int, end: int) -> list[bytes]:
        """Read entries ``[start, end)`` (see ``LedgerStore.entries``).

        Args:
            start: the first index.
            end: one past the last index.

        Raises:
            NotFoundError: the range is outside the tree.
            LimitExceededError: the range is over the store's read limit.
            StoreError: the store failed.

        Returns:
            The entries.
        """
        return self._store.entries(start, end)

    def entry(self, index: int) -> bytes:
        """Read one entry.

        Args:
            index: the entry index.

        Raises:
            NotFoundError: the index is outside the tree.
            StoreError: the store failed.

        Returns:
            The entry bytes.
        """
        return self._store.entry(index)

    def find(self, key: str) -> int | None:
        """Look up the entry appended with a key.

        Args:
            key: the lookup key.

        Raises:
            StoreError: the store failed.

        Returns:
            The index, or None.
        """
        return self._store.find(key)

    @property
    def store(self) -> LedgerStore:
        """The underlying store (for auditing)."""
        return self._store

    @property
    def origin(self) -> str:
        """The checkpoint origin."""
        return self._checkpoints.origin
