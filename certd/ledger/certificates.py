"""Feasibility certificates in the ledger: one call records one, one call finds one.

Example (see tests/integration for a running server)::

    certificates = CertificateLog(ledger)
    pending = certificates.record(draft)  # the one ledger call of a Certify
    match pending.result(timeout_s=30):
        case Recorded(certificate=cert, existing=existing): ...
        case Taken(label=other): ...  # the same solution is certified under ``other``

What the ledger guarantees here, and nothing about certification rules:

* one certificate per (task, κ, label): a second record of the same key returns the first
  (``Recorded.existing``), also while the first is still being written;
* one label per (task, κ, canonical solution): a record whose canonical digest is certified,
  or being certified, under another label is ``Taken``.

The ledger keys that carry these guarantees (``feasibility/<task>/<κ>/<label>``, and on a
shared store ``canonical/<task>/<κ>/<canonical digest>`` claimed in the same atomic append)
are built here and nowhere else. On a shared store (several replicas), ``record`` first
indexes what other replicas appended (at most every ``catch_up_interval_s``); when another
replica wins the race for a key anyway, the store refuses the append (``DuplicateKeyError``)
and ``record``'s result is the other replica's certificate, or ``Taken``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from certd.errors import CertdError, NotFoundError
from certd.ledger.certindex import CertificateIndex, IndexedCertificate
from certd.ledger.log import Ledger
from certd.ledger.store import KEY_SEPARATOR, DuplicateKeyError

__all__ = ["CertificateLog", "PendingRecord", "Recorded", "Taken"]

CATCH_UP_INTERVAL_S = 0.5
"""On a shared ledger, how often ``record`` indexes what other replicas appended."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """A durable certificate; ``existing`` when it was recorded before this request."""

    certificate: IndexedCertificate
    existing: bool = False


@dataclass(frozen=True, slots=True)
class Taken:
    """The draft's canonical solution is certified under another label of its (task, κ)."""

    label: str


_Key = tuple[str, str, str]


class PendingRecord:
    """The outcome of ``CertificateLog.record``: decided at once, or after a group commit."""

    def __init__(
        self,
        draft: IndexedCertificate,
        *,
        decided: Recorded | Taken | None = None,
        future: Future[IndexedCertificate] | None = None,
        joined: bool = False,
        resolve: Callable[[IndexedCertificate, DuplicateKeyError], Recorded | Taken] | None = None,
    ) -> None:
        self._draft = draft
        self._decided = decided
        self._future = future
        self._joined = joined  # waiting on another request's write of the same key
        self._resolve = resolve

    def result(self, timeout_s: float | None = None) -> Recorded | Taken:
        """Wait until the certificate is durable (or found taken).

        Raises:
            LedgerError: the ledger write failed (nothing was recorded).
            TimeoutError: ``timeout_s`` passed.
        """
        if self._decided is not None:
            return self._decided
        assert self._future is not None and self._resolve is not None
        try:
            cert = self._future.result(timeout=timeout_s)
        except DuplicateKeyError as e:
            return self._resolve(self._draft, e)
        existing = self._joined or cert.envelope != self._draft.envelope
        return Recorded(cert, existing=existing)


@dataclass(frozen=True, slots=True)
class _Write:
    cert: IndexedCertificate
    future: Future[IndexedCertificate]


class CertificateLog:
    """The feasibility certificates of one ledger: record, find, list (thread-safe).

    Decisions for one task are serialised by a striped lock; the ledger write happens outside
    the lock, and a concurrent record of the same key waits on the same write.
    """

    _STRIPES = 64

    def __init__(self, ledger: Ledger, *, catch_up_interval_s: float = CATCH_UP_INTERVAL_S):
        self._ledger = ledger
        self._index = CertificateIndex(ledger)
        self._catch_up_interval_s = catch_up_interval_s
        self._locks = [threading.Lock() for _ in range(self._STRIPES)]
        self._writes: dict[_Key, _Write] = {}
        self._writes_canonical: dict[_Key, str] = {}  # (task, κ, canonical) → label

    @property
    def index(self) -> CertificateIndex:
        """The in-memory index (task → κ → label), for readers such as the learned κ."""
        return self._index

    @property
    def shared(self) -> bool:
        """Whether other replicas append to the same ledger."""
        return self._ledger.store.shared

    def _lock(self, task_digest: str) -> threading.Lock:
        return self._locks[int(task_digest[:8], 16) % self._STRIPES]

    @staticmethod
    def _ledger_key(draft: IndexedCertificate, shared: bool) -> str:
        key = CertificateIndex.key(draft.task_digest, draft.kappa, draft.label)
        if shared:  # one atomic append claims the canonical solution too
            key += KEY_SEPARATOR + CertificateIndex.canonical_key(
                draft.task_digest, draft.kappa, draft.canonical_digest
            )
        return key

    def record(self, draft: IndexedCertificate) -> PendingRecord:
        """Record a signed certificate unless its key or its canonical solution is taken.

        Args:
            draft: the certificate (its ``index`` is ignored).

        Raises:
            LedgerError: the ledger refused the write at once (closed, stopped).
            InvalidInputError, LimitExceededError: the entry is over a store limit.

        Returns:
            The pending outcome; ``result()`` waits for the group commit.
        """
        return self.record_many([draft])[0]

    def record_many(self, drafts: Sequence[IndexedCertificate]) -> list[PendingRecord]:
        """Record certificates in order, each decided exactly as ``record`` decides it.

        On a ledger of its own the new certificates go to the ledger as one append (one
        group-commit request, committed and checkpointed together); on a shared ledger each
        is its own append, so that a key another replica took fails only its own record.

        Raises:
            LedgerError: the ledger refused the write at once (closed, stopped).
            InvalidInputError, LimitExceededError: an entry is over a store limit.

        Returns:
            One pending outcome per draft, in order.
        """
        if self.shared:
            # Catching up only saves a write for a label another replica certified: the
            # store's unique keys refuse it anyway (``_resolve``).
            self._index.catch_up(min_interval_s=self._catch_up_interval_s)
        claimed = [self._claim(draft) for draft in drafts]
        writes = [c for c in claimed if isinstance(c, _Write)]
        if self.shared:
            for write in writes:
                self._append([write])
        elif writes:
            self._append(writes)
        return [
            c
            if isinstance(c, PendingRecord)
            else PendingRecord(c.cert, future=c.future, resolve=self._resolve)
            for c in claimed
        ]

    def _claim(self, draft: IndexedCertificate) -> PendingRecord | _Write:
        """Decide a draft under its task's lock: already decided, or a new write to append."""
        key = (draft.task_digest, draft.kappa, draft.label)
        canonical = (draft.task_digest, draft.kappa, draft.canonical_digest)
        with self._lock(draft.task_digest):
            write = self._writes.get(key)
            if write is not None:  # decided as the first request's write decides
                return PendingRecord(
                    write.cert, future=write.future, joined=True, resolve=self._resolve
                )
            # The canonical solution first, the label second: the index gains entries without
            # this lock (a catch-up, another request's ``_resolve``), and the entry of this very
            # draft (a retry whose first reply was lost) found by its canonical solution only
            # would read as taken by its own label: a PSEUDO_FORK for a certified label.
            clash = self._index.label_for_canonical(*canonical) or self._writes_canonical.get(
                canonical
            )
            existing = self._index.get(*key)
            if existing is not None:
                return PendingRecord(draft, decided=Recorded(existing, existing=True))
            if clash is not None:
                return PendingRecord(draft, decided=Taken(clash))
            write = _Write(draft, Future())
            self._writes[key] = write
            self._writes_canonical[canonical] = draft.label
            return write

    def _append(self, writes: list[_Write]) -> None:
        """Hand claimed writes to the ledger as one append (outside the locks: a full
        group-commit queue may block here)."""
        items = [(self._ledger_key(w.cert, self.shared), w.cert.envelope) for w in writes]
        try:
            written = self._ledger.append_many(items)
        except CertdError as e:
            for w in writes:
                w.future.set_exception(e)
                self._settle(w)
            raise
        written.add_done_callback(lambda f: self._settle_all(writes, f))

    def _settle_all(self, writes: list[_Write], written: Future[list[int]]) -> None:
        """Index every write of a settled append (or fail them all)."""
        error = written.exception()
        if error is not None:
            for w in writes:
                w.future.set_exception(error)
                self._settle(w)
            return
        for w, index in zip(writes, written.result(), strict=True):
            self._settle(w, index)

    def _settle(self, write: _Write, index: int | None = None) -> None:
        """Move a write into the index once it is durable at ``index`` (None: it failed)."""
        key = (write.cert.task_digest, write.cert.kappa, write.cert.label)
        if index is None:
            with self._lock(key[0]):
                self._forget(key, write)
            return
        placed = write.cert.with_index(index)
        with self._lock(key[0]):
            self._index.add(placed)
            self._forget(key, write)
        write.future.set_result(placed)

    def _forget(self, key: _Key, write: _Write) -> None:
        """Drop a settled write (caller holds the task's lock)."""
        self._writes.pop(key, None)
        self._writes_canonical.pop((key[0], key[1], write.cert.canonical_digest), None)

    def _resolve(self, mine: IndexedCertificate, error: DuplicateKeyError) -> Recorded | Taken:
        """Another replica took a key first: its certificate, or ``Taken``.

        Raises:
            DuplicateKeyError: the stored entry is not a certificate of the same (task, κ).
        """
        if error.index is None:
            raise error
        self._ledger.cover(error.index)
        stored = self._index.load(error.index)
        if stored is None or (stored.task_digest, stored.kappa) != (mine.task_digest, mine.kappa):
            raise error
        self._index.add(stored)
        if stored.label == mine.label:
            return Recorded(stored, existing=True)
        if stored.canonical_digest == mine.canonical_digest:
            return Taken(stored.label)
        raise error

    # -- reads ----------------------------------------------------------------------------

    def by_id(self, certificate_id: str) -> IndexedCertificate:
        """The certificate with an id (hex SHA-256 of its envelope).

        Raises:
            NotFoundError: no such certificate (after catching up, on a shared ledger).
            StoreError: the store failed.
        """
        at = self._index.index_of(certificate_id)
        if at is None and self.shared:  # another replica's: catch up before NOT_FOUND
            self._index.catch_up(refresh=True)
            at = self._index.index_of(certificate_id)
        if at is None:
            raise NotFoundError(f"no certificate with id {certificate_id!r}")
        return self._load(at)

    def at(self, ledger_index: int) -> IndexedCertificate:
        """The certificate at a ledger index.

        Raises:
            NotFoundError: the index is beyond the log, or its entry is not a certificate.
            StoreError: the store failed.
        """
        if ledger_index >= self._ledger.size() and self.shared:
            self._ledger.refresh()
        size = self._ledger.size()
        if ledger_index >= size:
            raise NotFoundError(f"ledger index {ledger_index} is not below size {size}")
        return self._load(ledger_index)

    def _load(self, at: int) -> IndexedCertificate:
        cert = self._index.load(at)
        if cert is None:
            raise NotFoundError(f"ledger entry {at} is not a feasibility certificate")
        return cert

    def labels(
        self, task_digest: str, kappa: str, *, after: str | None = None, limit: int | None = None
    ) -> list[IndexedCertificate]:
        """The certificates of (task, κ) in label order (a fork tree, or a page of one).

        Args:
            task_digest: the task.
            kappa: the κ.
            after: only labels sorting after this one (a page cursor).
            limit: at most this many.

        Raises:
            StoreError: the store failed.
        """
        if self.shared:  # labels other replicas certified count too
            self._index.catch_up(refresh=True)
        items = self._index.label_items(task_digest, kappa, after=after, limit=limit)
        return [self._load(at) for _, at in items]
