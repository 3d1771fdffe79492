"""An in-memory index of the feasibility certificates in the ledger.

Example:
    >>> idx = CertificateIndex(None)
    >>> idx.add(IndexedCertificate(index=0, task_digest="ab" * 32, kappa="k", label="25,-",
    ...     label_fields={}, canonical_digest="cd", witness="(25-5)*4+3", envelope=b"{}"))
    >>> idx.labels("ab" * 32, "k"), idx.label_for_canonical("ab" * 32, "k", "cd")
    ([0], '25,-')

The ledger is the source of truth; the index is rebuilt from it at start-up (from the entries
appended under a ``feasibility/`` key, which the store lists without reading the others) and
updated as certificates become durable.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from certd.opening import PREDICATE_FEASIBILITY
from certd.payloads import sha256_hex

if TYPE_CHECKING:
    from certd.ledger.log import Ledger

__all__ = ["CertificateIndex", "IndexedCertificate"]

_SCAN_CHUNK = 4096
_FEASIBILITY_PREFIX = "feasibility/"


@dataclass(frozen=True, slots=True)
class IndexedCertificate:
    """A feasibility certificate and its place in the ledger (index -1 while pending)."""

    index: int
    task_digest: str
    kappa: str
    label: str
    label_fields: dict[str, str]
    canonical_digest: str
    witness: str
    envelope: bytes = field(repr=False)

    @property
    def certificate_id(self) -> str:
        """Hex SHA-256 of the envelope bytes."""
        return sha256_hex(self.envelope)

    def with_index(self, index: int) -> IndexedCertificate:
        """This certificate placed at ``index``."""
        return IndexedCertificate(  # not dataclasses.replace: this runs once per certificate
            index,
            self.task_digest,
            self.kappa,
            self.label,
            self.label_fields,
            self.canonical_digest,
            self.witness,
            self.envelope,
        )


@dataclass(slots=True)
class _Slot:
    index: int
    label_fields: dict[str, str]
    canonical_digest: str


class CertificateIndex:
    """task digest → κ → label → ledger index, plus certificate ids and canonical forms."""

    def __init__(self, ledger: Ledger | None) -> None:
        self._ledger = ledger
        self._lock = threading.Lock()
        self._by_task: dict[str, dict[str, dict[str, _Slot]]] = {}
        self._by_id: dict[bytes, int] = {}
        self._scan_lock = threading.Lock()
        self._scanned = 0
        self._ahead: set[int] = set()  # indexes added past the scan (ours), not parsed again
        self._caught_up_at = 0.0
        if ledger is not None:
            self._load(ledger)

    @staticmethod
    def key(task_digest: str, kappa: str, label: str) -> str:
        """The ledger lookup key of a feasibility certificate."""
        return f"{_FEASIBILITY_PREFIX}{task_digest}/{kappa}/{label}"

    @staticmethod
    def canonical_key(task_digest: str, kappa: str, canonical_digest: str) -> str:
        """The ledger key a certificate claims for its canonical solution (shared stores)."""
        return f"canonical/{task_digest}/{kappa}/{canonical_digest}"

    def _load(self, ledger: Ledger) -> None:
        with self._scan_lock:
            size = ledger.size()
            if self._scanned == 0 and self._load_keyed(ledger, size):
                return
            for start in range(self._scanned, size, _SCAN_CHUNK):
                end = min(size, start + _SCAN_CHUNK)
                with self._lock:
                    known = {i for i in self._ahead if start <= i < end}
                if len(known) == end - start:
                    continue
                for offset, entry in enumerate(ledger.entries(start, end)):
                    if start + offset in known:
                        continue
                    cert = parse_feasibility_entry(start + offset, entry)
                    if cert is not None:
                        self.add(cert)
            with self._lock:
                self._scanned = max(self._scanned, size)
                self._ahead = {i for i in self._ahead if i >= self._scanned}

    def _load_keyed(self, ledger: Ledger, size: int) -> bool:
        """First load: read only the entries appended under a ``feasibility/`` key.

        Every certificate is appended with its key (the store lists keys without reading
        entries), so receipts and other entries are never read at start-up.

        Returns:
            False when the store cannot list keys (then every entry is scanned).
        """
        indexes = ledger.store.keyed(_FEASIBILITY_PREFIX, size)
        if indexes is None:
            return False
        for start in range(0, len(indexes), _SCAN_CHUNK):
            chunk = indexes[start : start + _SCAN_CHUNK]
            for at, entry in zip(chunk, ledger.store.entries_at(chunk), strict=True):
                cert = parse_feasibility_entry(at, entry)
                if cert is not None:
                    self.add(cert)
        with self._lock:
            self._scanned = max(self._scanned, size)
            self._ahead = {i for i in self._ahead if i >= self._scanned}
        return True

    def catch_up(self, *, refresh: bool = False, min_interval_s: float = 0.0) -> None:
        """Index certificates other replicas appended since the last scan (shared ledgers).

        Args:
            refresh: first adopt the newest checkpoint in the shared store now (a reader
                about to answer NOT_FOUND), rather than the one the ledger last refreshed.
            min_interval_s: do nothing if the last catch-up began less than this long ago.

        Raises:
            StoreError: the ledger's store failed.
        """
        if self._ledger is None:
            return
        now = time.monotonic()
        if min_interval_s > 0 and now - self._caught_up_at < min_interval_s:
            return
        self._caught_up_at = now
        if refresh and self._ledger.store.shared:
            self._ledger.refresh()
        self._load(self._ledger)

    def add(self, cert: IndexedCertificate) -> None:
        """Record a durable certificate."""
        with self._lock:
            labels = self._by_task.setdefault(cert.task_digest, {}).setdefault(cert.kappa, {})
            labels[cert.label] = _Slot(cert.index, cert.label_fields, cert.canonical_digest)
            self._by_id[bytes.fromhex(cert.certificate_id)] = cert.index
            if cert.index >= self._scanned:
                self._ahead.add(cert.index)

    def _slot(self, task_digest: str, kappa: str, label: str) -> _Slot | None:
        with self._lock:
            return self._by_task.get(task_digest, {}).get(kappa, {}).get(label)

    def get(self, task_digest: str, kappa: str, label: str) -> IndexedCertificate | None:
        """The certificate for (task, κ, label), or None."""
        slot = self._slot(task_digest, kappa, label)
        return None if slot is None else self.load(slot.index)

    def label_for_canonical(
        self, task_digest: str, kappa: str, canonical_digest: str
    ) -> str | None:
        """The label already certified with this canonical solution, or None."""
        with self._lock:
            labels = self._by_task.get(task_digest, {}).get(kappa, {})
            for label, slot in labels.items():
                if slot.canonical_digest == canonical_digest:
                    return label
        return None

    def labels(self, task_digest: str, kappa: str) -> list[int]:
        """Ledger indexes of every certificate of (task, κ), in label order."""
        return [index for _, index in self.label_items(task_digest, kappa)]

    def label_items(
        self, task_digest: str, kappa: str, after: str | None = None, limit: int | None = None
    ) -> list[tuple[str, int]]:
        """(label, ledger index) of the certificates of (task, κ), in label order.

        Args:
            task_digest: the task.
            kappa: the κ.
            after: only labels sorting after this one (a page cursor).
            limit: at most this many.
        """
        with self._lock:
            labels = self._by_task.get(task_digest, {}).get(kappa, {})
            keys = sorted(k for k in labels if after is None or k > after)
            return [(k, labels[k].index) for k in keys[:limit]]

    def index_of(self, certificate_id: str) -> int | None:
        """The ledger index of a certificate id (hex SHA-256 of its envelope), or None."""
        try:
            raw = bytes.fromhex(certificate_id)
        except ValueError:
            return None
        with self._lock:
            return self._by_id.get(raw)

    def load(self, index: int) -> IndexedCertificate | None:
        """Read and parse the certificate at a ledger index (None if it is not one)."""
        if self._ledger is None:
            return None
        entries = self._ledger.entries(index, index + 1)
        return parse_feasibility_entry(index, entries[0]) if entries else None


def parse_feasibility_entry(index: int, entry: bytes) -> IndexedCertificate | None:
    """Parse a ledger entry as a feasibility certificate without checking its signature.

    The ledger is certd's own; ``certd audit`` checks every signature. Entries of other kinds
    (receipts) and unparseable entries give None.
    """
    try:
        env = json.loads(entry)
        st = json.loads(base64.b64decode(env["payload"]))
        if st.get("predicateType") != PREDICATE_FEASIBILITY:
            return None
        p = st["predicate"]
        return IndexedCertificate(
            index=index,
            task_digest=str(p["task_digest"]),
            kappa=str(p["kappa"]),
            label=str(p["label"]),
            label_fields={str(k): str(v) for k, v in dict(p["label_fields"]).items()},
            canonical_digest=str(p["canonical_digest"]),
            witness=str(p["witness"]),
            envelope=entry,
        )
    except (ValueError, KeyError, TypeError):
        return None
