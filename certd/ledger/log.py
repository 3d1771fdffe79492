"""The ledger: durable appends with group commit, and checkpoints it never signs inconsistently.

Example:
    >>> from certd.signing.keys import SigningKey
    >>> from certd.ledger.log import Ledger
    >>> from certd.ledger.sqlite import SQLiteStore
    >>> key = SigningKey.generate("certd.example/log")
    >>> with Ledger(SQLiteStore(":memory:"), key, "certd.example/log") as ledger:
    ...     ledger.append([("k", b"entry")])
    ...     ledger.checkpoint().checkpoint.size
    [0]
    1

Group commit: ``submit``/``append_many``/``append`` from any thread enqueue requests; one
committer thread takes up to ``max_batch_entries`` entries (or what arrived within
``max_delay_s`` of the first), appends them in one store transaction, verifies that the
new tree is consistent with the latest signed checkpoint, signs and stores a checkpoint
for the new size, and only then resolves the futures. A resolved future means the entry
is durable and covered by a stored signed checkpoint.

A log must never sign a checkpoint inconsistent with one it signed before
(c2sp.org/tlog-checkpoint). Before each append the ledger checks that the stored tree
still has the latest checkpoint's root; after it, that a consistency proof built from the
store links the latest checkpoint to the new root. On failure it raises ConsistencyError,
signs nothing, and refuses further appends (fail-stop); reads keep working.

Shared stores (``LedgerStore.shared``, e.g. Redis behind several replicas): before each
commit the ledger adopts the largest checkpoint any replica stored, after checking its
signature, that the store still has its root, and a consistency proof from the checkpoint
it held before; an append that lost the race to another replica (``AppendConflictError``)
is retried from the new size, and keys another replica took meanwhile fail only their own
requests. Readers adopt newer checkpoints at most every ``refresh_interval_s``. With a
``checkpoint_file`` the ledger also remembers the latest checkpoint it signed or adopted on
local disk, and refuses at start-up a store that does not extend it (e.g. a Redis that came
back from an older snapshot), so a restarted replica never signs a fork either.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from certd.atomicfile import write_atomic
from certd.errors import (
    CertdError,
    ConsistencyError,
    InvalidInputError,
    LedgerError,
    NotFoundError,
    ProofError,
)
from certd.ledger.checkpoint import Checkpoint, SignedCheckpoint, open_checkpoint, sign_checkpoint
from certd.ledger.merkle import (
    EMPTY_ROOT,
    NodeFn,
    consistency_proof,
    inclusion_proof,
    verify_consistency,
)
from certd.ledger.store import AppendConflictError, DuplicateKeyError, Entry, LedgerStore
from certd.signing.keys import SigningKey, VerifierKey

__all__ = ["GroupCommitConfig", "Ledger"]

log = logging.getLogger("certd.ledger")

_MAX_CONFLICT_RETRIES = 1000
_T = TypeVar("_T")


@dataclass(frozen=True)
class GroupCommitConfig:
    """Settings of the group-commit path.

    Attributes:
        max_batch_entries: flush when a batch holds this many entries.
        max_delay_s: flush at most this many seconds after the first request of a batch.
        max_pending_requests: requests queued before ``submit`` blocks (backpressure).
    """

    max_batch_entries: int = 1024
    max_delay_s: float = 0.002
    max_pending_requests: int = 65_536

    def __post_init__(self) -> None:
        if self.max_batch_entries < 1 or self.max_delay_s < 0 or self.max_pending_requests < 1:
            raise InvalidInputError(
                f"expected max_batch_entries >= 1, max_delay_s >= 0, "
                f"max_pending_requests >= 1, got {self}"
            )


@dataclass
class _Request:
    items: list[Entry]
    future: Future[list[int]] = field(default_factory=Future)


_STOP = object()


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

        Raises:
            SigningError: the latest stored checkpoint does not verify with ``signer``.
            LedgerError: its origin differs from ``origin``.
            ConsistencyError: the stored tree does not match the latest checkpoint.
            StoreError: the store failed.
        """
        Checkpoint(origin, 0, EMPTY_ROOT)  # validates the origin line
        self._store = store
        self._node_cache: dict[tuple[int, int], bytes] = {}
        self._signer = signer
        self._verifiers = [signer.verifier(), *previous_keys]
        self._origin = origin
        self._config = config or GroupCommitConfig()
        self._queue: queue.Queue[object] = queue.Queue(self._config.max_pending_requests)
        self._state_lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self._closed = False
        self._failed: LedgerError | None = None
        self._inflight: list[_Request] = []
        self._checkpoint_file = checkpoint_file
        self._refresh_interval_s = refresh_interval_s
        self._refresh_lock = threading.Lock()
        self._refreshed_at = 0.0
        self._latest: SignedCheckpoint | None = None
        self._latest_at = time.time()
        remembered = self._load_file()
        self._latest = remembered
        with self._commit_lock:
            self._check_store_explained()
            self._refresh_latest(verified=remembered is None)
            self._check_store_matches_latest()
            self._sign_up_to(self._store.size())
        self._thread = threading.Thread(target=self._run, name="ledger-committer", daemon=True)
        self._thread.start()

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
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)  # after every request accepted before close
        self._thread.join()
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
        if not items:
            raise InvalidInputError("expected at least one entry to append, got none")
        if len(items) > self._store.limits.max_batch_entries:
            raise InvalidInputError(
                f"expected at most {self._store.limits.max_batch_entries} entries, got {len(items)}"
            )
        for key, data in items:
            self._store.validate_entry(key, data)
        request = _Request(list(items))
        with self._state_lock:
            if self._failed is not None:
                raise self._failed
            if self._closed:
                raise LedgerError("expected an open ledger, got a closed one")
            self._queue.put(request)
        return request.future

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
        inner = self.append_many([(key, entry)])
        outer: Future[int] = Future()

        def relay(f: Future[list[int]]) -> None:
            try:
                if f.cancelled():
                    outer.cancel()
                elif (error := f.exception()) is not None:
                    outer.set_exception(error)
                else:
                    outer.set_result(f.result()[0])
            except InvalidStateError:  # the caller cancelled ``outer`` meanwhile
                pass

        def cancel_inner(f: Future[int]) -> None:
            if f.cancelled():
                inner.cancel()  # effective only before the committer picks it up

        inner.add_done_callback(relay)
        outer.add_done_callback(cancel_inner)
        return outer

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

    # -- committer ------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:
            # A bug, not a store or consistency failure (those resolve futures in _commit):
            # fail every waiting request instead of leaving it unresolved, then stop.
            error = LedgerError(f"the ledger committer stopped: {e!r}")
            self._failed = error
            pending = list(self._inflight)
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, _Request) and item.future.set_running_or_notify_cancel():
                    pending.append(item)
            for r in pending:
                if not r.future.done():
                    r.future.set_exception(error)
            raise error from e

    def _loop(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is _STOP:
                break
            assert isinstance(first, _Request)
            batch = [first]
            count = len(first.items)
            deadline = time.monotonic() + self._config.max_delay_s
            while count < self._config.max_batch_entries:
                try:
                    nxt = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                assert isinstance(nxt, _Request)
                batch.append(nxt)
                count += len(nxt.items)
            self._commit(batch)

    def _commit(self, batch: list[_Request]) -> None:
        live = [r for r in batch if r.future.set_running_or_notify_cancel()]
        self._inflight = live
        if self._failed is not None:
            for r in live:
                r.future.set_exception(self._failed)
            return
        accepted = self._reject_duplicate_keys(live)
        if not accepted:
            return
        try:
            with self._commit_lock, self._store.writer_lock():
                accepted, first = self._append_with_retries(accepted)
                if not accepted:
                    return
                self._sign_up_to(first + sum(len(r.items) for r in accepted))
        except CertdError as e:
            for r in accepted:
                if not r.future.done():  # some were failed already (keys another replica took)
                    r.future.set_exception(e)
            return
        position = first
        for r in accepted:
            r.future.set_result(list(range(position, position + len(r.items))))
            position += len(r.items)

    def _append_with_retries(self, accepted: list[_Request]) -> tuple[list[_Request], int]:
        """Append the accepted requests' entries; on a shared store, retry lost races.

        Returns:
            (the requests appended, the index of their first entry); requests whose keys
            another writer took meanwhile are failed and left out.
        """
        for attempt in range(_MAX_CONFLICT_RETRIES):
            if self._store.shared:
                self._refresh_latest()
            self._check_store_matches_latest()
            items = [item for r in accepted for item in r.items]
            try:
                first, nodes = self._store.append_nodes(items)
                self._cache_nodes(nodes)
                return accepted, first
            except AppendConflictError:
                time.sleep(random.uniform(0, 0.0005 * min(attempt + 1, 20)))
            except DuplicateKeyError as e:
                if not self._store.shared or e.index is None:
                    raise
                before = len(accepted)
                accepted = self._reject_duplicate_keys(accepted)  # another replica took a key
                if not accepted:
                    return [], 0
                if len(accepted) == before:
                    raise  # a key no request owns up to: fail the batch rather than spin
        raise self._fail(f"append lost {_MAX_CONFLICT_RETRIES} races to other writers in a row")

    def _reject_duplicate_keys(self, requests: list[_Request]) -> list[_Request]:
        """Fail requests whose keys are stored already or taken earlier in the batch."""
        keys = [k for r in requests for k, _ in r.items if k is not None]
        try:
            stored = self._store.find_many(keys)
        except CertdError as e:
            for r in requests:
                r.future.set_exception(e)
            return []
        taken: set[str] = set()
        accepted: list[_Request] = []
        for r in requests:
            error: DuplicateKeyError | None = None
            mine: set[str] = set()
            for key, _ in r.items:
                if key is None:
                    continue
                if key in stored:
                    error = DuplicateKeyError(key, stored[key])
                elif key in taken or key in mine:
                    error = DuplicateKeyError(key, None)
                if error is not None:
                    break
                mine.add(key)
            if error is not None:
                r.future.set_exception(error)
            else:
                taken |= mine
                accepted.append(r)
        return accepted

    # -- checkpoints ----------------------------------------------------------------------------

    def _open(self, size: int, note: str) -> SignedCheckpoint:
        checkpoint = open_checkpoint(note, self._verifiers, origin=self._origin)
        if checkpoint.size != size:
            raise ConsistencyError(
                f"expected the checkpoint stored at size {size} to have that size, "
                f"got {checkpoint.size}"
            )
        return SignedCheckpoint(note, checkpoint)

    def _load_file(self) -> SignedCheckpoint | None:
        """The checkpoint remembered in ``checkpoint_file``, if any."""
        path = self._checkpoint_file
        if path is None or not path.exists():
            return None
        try:
            note = path.read_text(encoding="utf-8")
        except OSError as e:
            raise LedgerError(f"cannot read the remembered checkpoint {path}: {e}") from e
        checkpoint = open_checkpoint(note, self._verifiers, origin=self._origin)
        return SignedCheckpoint(note, checkpoint)

    def _remember(self, signed: SignedCheckpoint) -> None:
        """Make ``signed`` the latest checkpoint (never a smaller one) and record it on disk."""
        current = self._latest
        if current is not None and current.checkpoint.size >= signed.checkpoint.size:
            return
        self._latest = signed
        self._latest_at = time.time()
        path = self._checkpoint_file
        if path is not None:
            try:
                write_atomic(path, signed.note.encode("utf-8"))
            except OSError as e:
                raise LedgerError(f"cannot record the checkpoint in {path}: {e}") from e

    def _refresh_latest(self, verified: bool = False) -> None:
        """Adopt the store's latest checkpoint if it is larger than the one held.

        Args:
            verified: trust a stored checkpoint without a predecessor as is (at start-up);
                the caller then checks the store against it.
        """
        with self._refresh_lock:
            self._refreshed_at = time.monotonic()
            found = self._store.latest_checkpoint()
            current = self._latest
            if found is None or (current is not None and found[0] <= current.checkpoint.size):
                return
            signed = self._open(*found)
            new = signed.checkpoint
            if current is not None or not verified:
                try:
                    root = self._store.root(new.size)
                except CertdError as e:
                    raise self._fail(f"cannot recompute the root at size {new.size}: {e}", e) from e
                if root != new.root_hash:
                    raise self._fail(
                        f"expected the stored root at size {new.size} to be "
                        f"{new.root_hash.hex()} (stored checkpoint), got {root.hex()}"
                    )
            if current is not None and current.checkpoint.size > 0:
                old = current.checkpoint
                try:
                    proof = self._store.batched(
                        lambda node_fn: consistency_proof(old.size, new.size, node_fn)
                    )
                    verify_consistency(old.size, new.size, proof, old.root_hash, new.root_hash)
                except ProofError as e:
                    raise self._fail(
                        f"the stored checkpoint at size {new.size} is not consistent with the "
                        f"one at size {old.size}: {e}",
                        e,
                    ) from e
            self._remember(signed)

    def _fail(self, message: str, cause: BaseException | None = None) -> ConsistencyError:
        error = ConsistencyError(message)
        error.__cause__ = cause
        self._failed = error  # read by append_many; a plain assignment, no lock needed
        return error

    def _check_store_matches_latest(self) -> None:
        """Refuse to go on unless the stored tree still has the latest checkpoint's root."""
        if self._latest is None:
            return
        signed = self._latest.checkpoint
        stored_size = self._store.size()
        if stored_size < signed.size:
            raise self._fail(
                f"expected at least {signed.size} stored entries (latest checkpoint), "
                f"got {stored_size}"
            )
        try:
            root = self._store.root(signed.size)
        except CertdError as e:
            raise self._fail(f"cannot recompute the root at size {signed.size}: {e}", e) from e
        if root != signed.root_hash:
            raise self._fail(
                f"expected the stored root at size {signed.size} to be "
                f"{signed.root_hash.hex()} (latest checkpoint), got {root.hex()}"
            )

    def _check_store_explained(self) -> None:
        """Refuse to start on a store holding rows beyond its tree (fail-stop, not UNAVAILABLE).

        Such a row (a junk entry at ``idx = size``, say) would make every later append fail;
        the operator must look (``certd audit`` names each row) and repair the store.
        """
        strays = self._store.unexplained()
        if strays:
            raise self._fail(
                "refusing to start: the ledger store holds state its tree does not explain ("
                + "; ".join(strays)
                + "); run `certd audit` and repair the store before serving"
            )

    def _sign_up_to(self, size: int) -> None:
        """Sign and store a checkpoint for ``size`` after proving it extends the latest one."""
        current = self._latest
        if current is not None and current.checkpoint.size >= size:
            return  # covered by a checkpoint already checked (another replica's, or ours)
        root = self._store.root(size)
        # Every tree extends the empty one, so a size-0 checkpoint needs no proof.
        if current is not None and current.checkpoint.size > 0:
            old = current.checkpoint
            try:
                proof = self._store.batched(
                    lambda node_fn: consistency_proof(old.size, size, node_fn)
                )
                verify_consistency(old.size, size, proof, old.root_hash, root)
            except ProofError as e:
                raise self._fail(
                    f"refusing to sign size {size}: not consistent with the checkpoint "
                    f"at size {old.size}: {e}",
                    e,
                ) from e
        checkpoint = Checkpoint(self._origin, size, root)
        note = sign_checkpoint(checkpoint, self._signer)
        self._store.put_checkpoint(size, note)
        self._remember(SignedCheckpoint(note, checkpoint))

    # -- reads --------------------------------------------------------------------------------

    def checkpoint(self) -> SignedCheckpoint:
        """Return the latest signed checkpoint.

        Returns:
            The signed note and its parsed checkpoint.
        """
        if (
            self._store.shared
            and time.monotonic() - self._refreshed_at >= self._refresh_interval_s
            and self._failed is None
        ):
            try:
                self._refresh_latest()
            except CertdError as e:  # serve the checkpoint held; appends fail-stop if needed
                log.warning("cannot adopt a newer checkpoint: %s", e)
        latest = self._latest
        assert latest is not None  # set in __init__
        return latest

    def refresh(self) -> SignedCheckpoint:
        """Adopt the newest checkpoint in a shared store now, without waiting for the interval.

        A reader that missed something (another replica's certificate) calls this before
        answering NOT_FOUND: every acknowledged entry is covered by a checkpoint stored
        before its acknowledgement, so after a refresh the ledger's size covers it.

        Returns:
            The latest signed checkpoint.
        """
        if self._store.shared and self._failed is None:
            try:
                self._refresh_latest()
            except CertdError as e:  # serve the checkpoint held; appends fail-stop if needed
                log.warning("cannot adopt a newer checkpoint: %s", e)
        latest = self._latest
        assert latest is not None  # set in __init__
        return latest

    @property
    def pending_requests(self) -> int:
        """Append requests queued for the committer (a queue depth)."""
        return self._queue.qsize()

    @property
    def checkpoint_time(self) -> float:
        """POSIX time this ledger signed or adopted its latest checkpoint."""
        return self._latest_at

    def health(self) -> str | None:
        """Why the ledger cannot take appends, or None when it can.

        Returns:
            A reason (fail-stop after a consistency failure, a dead committer, a store
            that does not answer), or None.
        """
        if self._failed is not None:
            return f"ledger stopped: {self._failed}"
        if self._closed:
            return "ledger closed"
        if not self._thread.is_alive():
            return "ledger committer thread is not running"
        try:
            self._store.size()
        except CertdError as e:
            return f"ledger store: {e}"
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
        latest = self.checkpoint()
        if index < latest.checkpoint.size:
            return latest
        with self._commit_lock:
            if self._failed is not None:
                raise self._failed
            if self._store.shared:
                self._refresh_latest()
            self._check_store_matches_latest()
            size = self._store.size()
            if not 0 <= index < size:
                raise NotFoundError(f"expected an entry index below {size}, got {index}")
            self._sign_up_to(size)
        return self.checkpoint()

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
        note = self._store.checkpoint_at(size)
        checkpoint = open_checkpoint(note, self._verifiers, origin=self._origin)
        if checkpoint.size != size:
            raise LedgerError(
                f"expected the checkpoint stored at size {size} to have that size, "
                f"got {checkpoint.size}"
            )
        return SignedCheckpoint(note, checkpoint)

    def _check_signed_size(self, size: int) -> None:
        signed = self.checkpoint().checkpoint.size
        if not 0 <= size <= signed:
            raise NotFoundError(
                f"expected a tree size within the latest checkpoint (<= {signed}), got {size}"
            )

    _NODE_CACHE_MAX = 1 << 17

    def _cache_nodes(self, nodes: Sequence[tuple[int, int, bytes]]) -> None:
        """Keep the nodes an append wrote: proofs of fresh entries then read nothing back."""
        cache = self._node_cache
        if len(cache) + len(nodes) > self._NODE_CACHE_MAX:
            cache.clear()
        cache.update(((level, index), h) for level, index, h in nodes)

    def _served(self, compute: Callable[[NodeFn], _T], size: int) -> _T:
        """Run a proof computation for serving, its nodes through a bounded cache.

        Complete nodes never change once written, so caching them is safe for serving; the
        integrity checks before signing read the store directly. Nodes missing from the
        cache are fetched in one store call. ``size`` is the signed tree size the
        computation reads within (stored, so its nodes are checked against it without a read
        of the store's size).
        """
        cache = self._node_cache
        wanted: list[tuple[int, int]] = []

        def record(level: int, index: int) -> bytes:
            if (level, index) not in cache:
                wanted.append((level, index))
            return EMPTY_ROOT

        compute(record)
        table: dict[tuple[int, int], bytes] = {}
        if wanted:
            unique = list(dict.fromkeys(wanted))
            table = dict(zip(unique, self._store.nodes_at(unique, within=size), strict=True))
            if len(cache) + len(table) > self._NODE_CACHE_MAX:
                cache.clear()
            cache.update(table)

        def node(level: int, index: int) -> bytes:
            hit = table.get((level, index))
            return hit if hit is not None else cache[(level, index)]

        return compute(node)

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
        self._check_signed_size(tree_size)
        return self._served(lambda node_fn: inclusion_proof(index, tree_size, node_fn), tree_size)

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
        size = latest.checkpoint.size
        return latest, self._served(lambda node_fn: inclusion_proof(index, size, node_fn), size)

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
        self._check_signed_size(size2)
        return self._served(lambda node_fn: consistency_proof(size1, size2, node_fn), size2)

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
        return self._origin
