"""Group commit: one committer thread appends what every caller queued, in one transaction.

Example (through ``certd.ledger.log.Ledger``, which owns a ``Committer``)::

    future = ledger.submit("feasibility/…", envelope)  # any thread
    index = future.result()  # durable and covered by a stored signed checkpoint

``submit``/``append_many`` from any thread enqueue requests; the committer takes up to
``max_batch_entries`` entries (or what arrived within ``max_delay_s`` of the first), appends
them in one store transaction, has the ``Checkpointer`` sign a checkpoint for the new size
(after its consistency checks), and only then resolves the futures. On a shared store an
append that lost the race to another replica (``AppendConflictError``) is retried from the
new size, and keys another replica took meanwhile fail only their own requests.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

from certd.errors import CertdError, InvalidInputError, LedgerError
from certd.ledger.checkpointer import Checkpointer
from certd.ledger.store import AppendConflictError, DuplicateKeyError, Entry, LedgerStore

__all__ = ["Committer", "GroupCommitConfig"]

_MAX_CONFLICT_RETRIES = 1000


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


class Committer:
    """The committer thread and its queue (see the module notes)."""

    def __init__(
        self,
        store: LedgerStore,
        checkpoints: Checkpointer,
        config: GroupCommitConfig,
        on_nodes: Callable[[Sequence[tuple[int, int, bytes]]], None],
    ) -> None:
        """Args:
        store: the store appended to.
        checkpoints: signs a checkpoint after each append; its ``failed`` stops appends.
        config: the group-commit settings.
        on_nodes: receives the nodes each append wrote (the proof reader's cache).
        """
        self._store = store
        self._checkpoints = checkpoints
        self._config = config
        self._on_nodes = on_nodes
        self._queue: queue.Queue[object] = queue.Queue(config.max_pending_requests)
        self._state_lock = threading.Lock()
        self._closed = False
        self._inflight: list[_Request] = []
        self._thread = threading.Thread(target=self._run, name="ledger-committer", daemon=True)

    def start(self) -> None:
        """Start the committer thread."""
        self._thread.start()

    def close(self) -> bool:
        """Commit every request queued so far and stop the thread.

        Returns:
            False when ``close`` had begun before (then it returns at once).
        """
        with self._state_lock:
            if self._closed:
                return False
            self._closed = True
            self._queue.put(_STOP)  # after every request accepted before close
        self._thread.join()
        return True

    @property
    def closed(self) -> bool:
        """Whether ``close`` began."""
        return self._closed

    @property
    def alive(self) -> bool:
        """Whether the committer thread runs."""
        return self._thread.is_alive()

    @property
    def pending_requests(self) -> int:
        """Append requests queued for the committer (a queue depth)."""
        return self._queue.qsize()

    def append_many(self, items: Sequence[Entry]) -> Future[list[int]]:
        """Queue entries to be appended together (``Ledger.append_many``)."""
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
            if self._checkpoints.failed is not None:
                raise self._checkpoints.failed
            if self._closed:
                raise LedgerError("expected an open ledger, got a closed one")
            self._queue.put(request)
        return request.future

    def submit(self, key: str | None, entry: bytes) -> Future[int]:
        """Queue one entry (``Ledger.submit``)."""
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

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:
            # A bug, not a store or consistency failure (those resolve futures in _commit):
            # fail every waiting request instead of leaving it unresolved, then stop.
            error = LedgerError(f"the ledger committer stopped: {e!r}")
            self._checkpoints.failed = error
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
        failed = self._checkpoints.failed
        if failed is not None:
            for r in live:
                r.future.set_exception(failed)
            return
        accepted = self._reject_duplicate_keys(live)
        if not accepted:
            return
        try:
            with self._checkpoints.lock, self._store.writer_lock():
                accepted, first = self._append_with_retries(accepted)
                if not accepted:
                    return
                self._checkpoints.sign_up_to(first + sum(len(r.items) for r in accepted))
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
                self._checkpoints.refresh_latest()
            self._checkpoints.check_store_matches_latest()
            items = [item for r in accepted for item in r.items]
            try:
                first, nodes = self._store.append_nodes(items)
                self._on_nodes(nodes)
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
        raise self._checkpoints.fail(
            f"append lost {_MAX_CONFLICT_RETRIES} races to other writers in a row"
        )

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
