"""Audit a ledger: re-derive its tree, check every signature, check against trusted state.

Example:
    >>> from certd.signing import KeyRing, SigningKey, make_statement, sign_envelope
    >>> from certd.statements import PREDICATE_VERDICT_RECEIPT, receipt_predicate
    >>> from certd.ledger.audit import audit_store
    >>> from certd.ledger.log import Ledger
    >>> from certd.ledger.store.sqlite import SQLiteStore
    >>> key = SigningKey.generate("certd.example/log")
    >>> ledger = Ledger(SQLiteStore(":memory:"), key, "certd.example/log")
    >>> root = bytes(32)
    >>> body = make_statement([("verdict-batch", root.hex())], PREDICATE_VERDICT_RECEIPT,
    ...     receipt_predicate(batch_root=root, batch_size=1, verifiers=["v"], issued_at=0))
    >>> env = sign_envelope(body, "application/vnd.in-toto+json", key)
    >>> ledger.append([(None, env.to_json())])
    [0]
    >>> report = audit_store(ledger.store, KeyRing([key.verifier()]), None)
    >>> report.ok, report.checkpoint_size
    (True, 1)
    >>> ledger.close()

Procedure (``docs/formats.md``, "Audit"):

1. Open the latest checkpoint with the trusted keys.
2. Stream every entry in order: hash it as a leaf, rebuild the tree with a ``CompactRange``
   (O(log n) memory), and, for a store, compare every complete node the rebuild creates
   with the stored one. Verify each entry as a DSSE envelope signed by a trusted key.
3. Compare the rebuilt root at the checkpoint's size with the signed root.
4. Compare the rebuilt root at the size of the last checkpoint this auditor trusted (the
   state file) with the trusted root, and verify the log's consistency proof between them.
5. Only if nothing is wrong, record the checkpoint in the state file.

``audit_store`` reads a ``LedgerStore`` directly; ``audit_remote`` takes three callables,
so the same logic runs over gRPC.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from certd.errors import CertdError, LedgerError
from certd.ledger.auditor import AuditRun
from certd.ledger.auditstate import AuditFault, AuditReport, AuditState
from certd.ledger.store import LedgerStore
from certd.signing.dsse import KeyRing
from certd.signing.keys import VerifierKey
from certd.tlog import consistency_proof as build_consistency_proof

__all__ = [
    "AuditFault",
    "AuditReport",
    "AuditState",
    "audit_remote",
    "audit_store",
]


def _ring(trusted: KeyRing | Iterable[VerifierKey]) -> KeyRing:
    return trusted if isinstance(trusted, KeyRing) else KeyRing(trusted)


def _start(
    trusted: KeyRing | Iterable[VerifierKey],
    checkpoint_keys: Iterable[VerifierKey] | None,
    origin: str | None,
    state_path: Path | None,
    verify_signatures: bool,
    workers: int | None,
    max_faults: int,
    opener: Callable[[], LedgerStore] | None = None,
) -> AuditRun:
    ring = _ring(trusted)
    keys = list(checkpoint_keys) if checkpoint_keys is not None else [t.key for t in ring]
    state: AuditState | None = None
    state_fault: str | None = None
    if state_path is not None:
        try:
            state = AuditState.load(state_path)
        except LedgerError as e:
            state_fault = str(e)
    audit = AuditRun(
        ring,
        keys,
        origin,
        state,
        verify_signatures=verify_signatures,
        workers=workers if workers is not None else (os.cpu_count() or 1),
        max_faults=max_faults,
        opener=opener,
    )
    if state_fault is not None:
        audit.fault("state", None, f"trusted state unusable: {state_fault}")
    return audit


def _workers_for(size: int, chunk: int, workers: int | None) -> int:
    """Worker processes for a log of ``size`` entries read ``chunk`` at a time: ``workers``
    (None: one per CPU), but no more than there are chunks to share out.

    A pool pays for itself only across chunks: with one chunk a single worker would do all
    the work while this process waits, after starting a forkserver and worker processes that
    import the store and signing code (about 0.2 CPU-seconds and 0.4 s on an 8-entry SQLite
    log here, more on Redis); this process checks it instead.
    """
    wanted = workers if workers is not None else (os.cpu_count() or 1)
    chunks = max(1, -(-size // chunk))
    return max(1, min(wanted, chunks))


def _feed_store(audit: AuditRun, store: LedgerStore, chunk: int, max_faults: int) -> int:
    """Open the store's latest checkpoint, then feed every entry; return the store's size.

    With an opener for the workers, they read, verify and hash the chunks (``AuditRun.chunks``)
    and the entries never pass through this process; a chunk with a missing entry is read
    here, gaps and stored leaf hashes included.
    """
    try:
        latest = store.latest_checkpoint()
    except CertdError as e:
        audit.fault("checkpoint", None, f"cannot read the latest checkpoint: {e}")
        latest = None
    cp = audit.open_checkpoint(None if latest is None else latest[1])
    if cp is not None and latest is not None and cp.size != latest[0]:
        audit.fault(
            "checkpoint",
            latest[0],
            f"checkpoint at {latest[0]}: the note stored there is for size {cp.size}",
        )
    size = store.size()
    for item in store.unexplained(limit=max_faults):
        audit.fault("store", None, f"the store holds state its tree does not explain: {item}")
    if audit.pool is not None and audit.opener is not None:
        for result in audit.chunks(size, chunk):
            if result.leaves is None:
                end = min(size, result.start + chunk)
                audit.compare_nodes(_feed_with_gaps(audit, store, result.start, end), store.nodes)
            else:
                audit.compare_nodes(audit.take_chunk(result), store.nodes)
        return size
    for start in range(0, size, chunk):
        end = min(size, start + chunk)
        entries: list[bytes | None]
        leaves: list[bytes | None] = []
        try:
            entries = list(store.entries(start, end))
        except CertdError:  # some entry is missing: find which, keep their leaf hashes
            entries = store.entries_with_gaps(start, end)
            leaves = store.nodes(0, start, end)
        created = audit.feed(start, entries, leaves)
        audit.compare_nodes(created, store.nodes)
    return size


def _feed_with_gaps(
    audit: AuditRun, store: LedgerStore, start: int, end: int
) -> list[tuple[int, int, bytes]]:
    """Feed a chunk a worker could not read whole, its signatures checked here."""
    entries = store.entries_with_gaps(start, end)
    audit.take_signatures(start, entries)
    return audit.feed(start, entries, store.nodes(0, start, end), signatures=False)


def _feed_remote(
    audit: AuditRun,
    get_checkpoint: Callable[[], str],
    get_entries: Callable[[int, int], list[bytes]],
    chunk_entries: int,
) -> int:
    """Open the served checkpoint, then feed its entries page by page; return how many."""
    try:
        note: str | None = get_checkpoint()
    except CertdError as e:
        audit.fault("checkpoint", None, f"cannot fetch the latest checkpoint: {e}")
        note = None
    cp = audit.open_checkpoint(note)
    size = 0 if cp is None else cp.size
    position = 0
    while position < size:
        end = min(size, position + max(1, chunk_entries))
        try:
            page = get_entries(position, end)
        except CertdError as e:
            audit.fault("entry", position, f"cannot fetch entries [{position}, {end}): {e}")
            break
        if not page:
            audit.fault("entry", position, f"entry {position}: the log returned no entries")
            break
        page = page[: end - position]
        audit.feed(position, page, [])
        position += len(page)
    return position


def audit_store(
    store: LedgerStore,
    trusted: KeyRing | Iterable[VerifierKey],
    state_path: Path | None,
    *,
    checkpoint_keys: Iterable[VerifierKey] | None = None,
    origin: str | None = None,
    verify_signatures: bool = True,
    workers: int | None = None,
    chunk_entries: int = 4096,
    max_faults: int = 1000,
    opener: Callable[[], LedgerStore] | None = None,
) -> AuditReport:
    """Audit a ledger store end to end.

    Besides the checks ``audit_remote`` makes, every stored complete node is compared with
    the rebuilt one, so a store whose leaves and nodes disagree is caught even when the
    signed root still matches.

    Args:
        store: the store.
        trusted: keys trusted to sign entries (DSSE key ids), as a KeyRing or keys.
        state_path: the auditor's state file, or None to audit without one.
        checkpoint_keys: keys trusted to sign checkpoints; None means ``trusted``.
        origin: the expected checkpoint origin, or None to accept any.
        verify_signatures: verify each entry's DSSE signature (the slow part).
        workers: processes parsing and verifying envelopes in parallel with the rebuild;
            None for one per CPU; at most one per chunk of the log, so a log of one chunk
            is audited in this process.
        chunk_entries: entries read per step, at most the store's read limit (with an
            opener, rounded down to a power of two).
        max_faults: faults kept in the report; more are counted only.
        opener: opens the same store again (picklable, e.g. a ``functools.partial`` of
            ``open_store``): each worker then reads its chunks itself, hashes the leaves and
            compares the chunk's stored nodes, so only leaf hashes come back here. None:
            this process reads every entry and sends it to the workers.

    Raises:
        LedgerError: the state file cannot be written after a passing audit.

    Returns:
        The report; ``ok`` is True only when no fault was found.
    """
    t0 = time.monotonic()
    chunk = max(1, min(chunk_entries, store.limits.max_read_entries))
    if opener is not None:  # a power of two: every full chunk is a complete subtree
        chunk = 1 << (chunk.bit_length() - 1)
    audit = _start(
        trusted,
        checkpoint_keys,
        origin,
        state_path,
        verify_signatures,
        _workers_for(store.size(), chunk, workers),
        max_faults,
        opener,
    )
    try:
        size = _feed_store(audit, store, chunk, max_faults)

        def proof(s1: int, s2: int) -> list[bytes]:
            return build_consistency_proof(s1, s2, store.node)

        audit.finish(size, proof)
    finally:
        audit.close()
    return audit.report(state_path, size, t0)


def audit_remote(
    get_checkpoint: Callable[[], str],
    get_entries: Callable[[int, int], list[bytes]],
    get_consistency_proof: Callable[[int, int], list[bytes]],
    trusted: KeyRing | Iterable[VerifierKey],
    state_path: Path | None,
    *,
    checkpoint_keys: Iterable[VerifierKey] | None = None,
    origin: str | None = None,
    verify_signatures: bool = True,
    workers: int | None = None,
    chunk_entries: int = 1000,
    max_faults: int = 1000,
) -> AuditReport:
    """Audit a ledger through its serving interface (e.g. gRPC).

    The callables must raise a ``CertdError`` on failure (translate transport errors at
    the boundary); such errors become faults.

    Args:
        get_checkpoint: returns the latest signed checkpoint note.
        get_entries: returns entries ``[start, end)``; it may return fewer (a page).
        get_consistency_proof: returns the consistency proof between two sizes.
        trusted: keys trusted to sign entries, as a KeyRing or keys.
        state_path: the auditor's state file, or None.
        checkpoint_keys: keys trusted to sign checkpoints; None means ``trusted``.
        origin: the expected checkpoint origin, or None.
        verify_signatures: verify each entry's DSSE signature.
        workers: signature-verifying processes, None for one per CPU.
        chunk_entries: entries requested per call.
        max_faults: faults kept in the report.

    Raises:
        LedgerError: the state file cannot be written after a passing audit.

    Returns:
        The report.
    """
    t0 = time.monotonic()
    audit = _start(
        trusted, checkpoint_keys, origin, state_path, verify_signatures, workers, max_faults
    )
    position = 0
    try:
        position = _feed_remote(audit, get_checkpoint, get_entries, chunk_entries)
        audit.finish(position, get_consistency_proof)
    finally:
        audit.close()
    return audit.report(state_path, position, t0)
