"""Audit a ledger: re-derive its tree, check every signature, check against trusted state.

Example:
    >>> from certd.signing import KeyRing, SigningKey, make_statement, sign_envelope
    >>> from certd.statements import PREDICATE_VERDICT_RECEIPT, receipt_predicate
    >>> from certd.ledger.audit import audit_store
    >>> from certd.ledger.log import Ledger
    >>> from certd.ledger.sqlite import SQLiteStore
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

import base64
import binascii
import json
import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from certd.atomicfile import write_atomic
from certd.errors import CertdError, LedgerError, SigningError
from certd.ledger.checkpoint import Checkpoint, open_checkpoint
from certd.ledger.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    CompactRange,
    leaf_hash,
    verify_consistency,
)
from certd.ledger.merkle import consistency_proof as build_consistency_proof
from certd.ledger.store import LedgerStore
from certd.signing.dsse import KeyRing
from certd.signing.keys import VerifierKey
from certd.statements import PREDICATE_TYPES, open_statement

__all__ = [
    "AuditFault",
    "AuditReport",
    "AuditState",
    "audit_remote",
    "audit_store",
]

_SIG_TASK_ENTRIES = 512


@dataclass(frozen=True)
class AuditFault:
    """One thing the audit found wrong.

    Attributes:
        kind: ``store`` (rows the tree does not explain), ``entry``, ``node``, ``signature``,
            ``checkpoint``, ``consistency`` or
            ``state``.
        index: the entry index it concerns, or None.
        message: what is wrong, with expected and actual values.
    """

    kind: str
    index: int | None
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class AuditState:
    """The last checkpoint an auditor trusted (its state file).

    Attributes:
        origin: the log origin.
        size: the tree size.
        root_hash: the 32-byte root hash.
    """

    origin: str
    size: int
    root_hash: bytes

    def to_json(self) -> bytes:
        """Serialize as JSON.

        Returns:
            ``{"origin": …, "root": base64, "size": …}`` as UTF-8 bytes.
        """
        obj = {
            "origin": self.origin,
            "root": base64.b64encode(self.root_hash).decode("ascii"),
            "size": self.size,
        }
        return json.dumps(obj, sort_keys=True, indent=2).encode("utf-8") + b"\n"

    @classmethod
    def from_json(cls, data: bytes) -> AuditState:
        """Parse a state file.

        Args:
            data: the file contents.

        Raises:
            LedgerError: the contents are not a valid state.

        Returns:
            The state.
        """
        try:
            obj = json.loads(data.decode("utf-8"))
            origin, size, root_b64 = obj["origin"], obj["size"], obj["root"]
            root = base64.b64decode(root_b64, validate=True)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, binascii.Error) as e:
            raise LedgerError(f"expected an audit state {{origin, size, root}}: {e}") from e
        if not isinstance(origin, str) or not isinstance(size, int) or size < 0:
            raise LedgerError("expected a string origin and a size >= 0 in the audit state")
        if len(root) != HASH_SIZE:
            raise LedgerError(f"expected a 32-byte root in the audit state, got {len(root)}")
        return cls(origin, size, root)

    @classmethod
    def load(cls, path: Path) -> AuditState | None:
        """Read a state file.

        Args:
            path: the file.

        Raises:
            LedgerError: the file exists but cannot be read or parsed.

        Returns:
            The state, or None when the file does not exist.
        """
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise LedgerError(f"cannot read the audit state {path}: {e.strerror}") from e
        return cls.from_json(data)

    def save(self, path: Path) -> None:
        """Write the state file atomically (``certd.atomicfile.write_atomic``).

        Args:
            path: the file.

        Raises:
            LedgerError: the file cannot be written.
        """
        path = Path(path)
        try:
            write_atomic(path, self.to_json(), parents=True)
        except OSError as e:
            raise LedgerError(f"cannot write the audit state {path}: {e.strerror}") from e


@dataclass(frozen=True)
class AuditReport:
    """What an audit found.

    Attributes:
        ok: True when no fault was found.
        origin: the checkpoint's origin, or None when no checkpoint could be opened.
        checkpoint_size: the latest checkpoint's tree size, or None.
        root_hash: the root rebuilt at ``checkpoint_size``, or None.
        entries_checked: how many entries were read and hashed.
        faults: the faults, entry faults by index first (at most ``max_faults``).
        faults_omitted: faults found beyond ``max_faults``.
        trusted_before: the state file's checkpoint before the audit, or None.
        state_updated: whether the state file was (re)written.
        duration_s: wall time of the audit, in seconds.
    """

    ok: bool
    origin: str | None
    checkpoint_size: int | None
    root_hash: bytes | None
    entries_checked: int
    faults: tuple[AuditFault, ...]
    faults_omitted: int
    trusted_before: AuditState | None
    state_updated: bool
    duration_s: float

    def summary(self) -> str:
        """Render the report as text for a terminal.

        Returns:
            One line of totals, then one line per fault.
        """
        head = (
            f"audit {'OK' if self.ok else 'FAILED'}: origin {self.origin}, checkpoint size "
            f"{self.checkpoint_size}, {self.entries_checked} entries checked in "
            f"{self.duration_s:.1f}s, {len(self.faults) + self.faults_omitted} faults"
        )
        lines = [head, *(f"  {f.message}" for f in self.faults)]
        if self.faults_omitted:
            lines.append(f"  … and {self.faults_omitted} more")
        return "\n".join(lines)


def _verify_signatures(
    start: int, entries: Sequence[bytes | None], trusted: KeyRing
) -> list[AuditFault]:
    """Open every entry as a statement certd signs (``certd.statements.open_statement``)."""
    faults: list[AuditFault] = []
    for offset, data in enumerate(entries):
        if data is None:
            continue
        index = start + offset
        try:
            open_statement(data, trusted, PREDICATE_TYPES)
        except SigningError as e:
            faults.append(
                AuditFault(
                    "signature",
                    index,
                    f"entry {index} does not verify as a signed statement "
                    f"({type(e).__name__}): {e}",
                )
            )
    return faults


class _Audit:
    """The audit's state machine: no I/O, fed entries in order by a driver."""

    def __init__(
        self,
        trusted: KeyRing,
        checkpoint_keys: list[VerifierKey],
        origin: str | None,
        state: AuditState | None,
        *,
        verify_signatures: bool,
        workers: int,
        max_faults: int,
    ) -> None:
        self.trusted = trusted
        self.checkpoint_keys = checkpoint_keys
        self.origin = origin
        self.state = state
        self.max_faults = max_faults
        self.faults: list[AuditFault] = []
        self.omitted = 0
        self.tree = CompactRange()
        self.broken_at: int | None = None  # first index the rebuild could not go past
        self.roots: dict[int, bytes] = {0: EMPTY_ROOT}
        self.wanted: set[int] = set()
        self.checkpoint: Checkpoint | None = None
        self.verify_signatures = verify_signatures
        self.workers = workers
        # Worker processes parse and verify envelopes in parallel with the rebuild (threads
        # would serialise the JSON parsing on the GIL); forkserver: never fork a threaded parent.
        self.pool: Executor | None = None
        if verify_signatures and workers > 1:
            self.pool = ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("forkserver")
            )
        self.pending: deque[Future[list[AuditFault]]] = deque()
        self.mismatched: set[tuple[int, int]] = set()

    def close(self) -> None:
        """Stop the signature threads (also when the audit is cut short by an error)."""
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def fault(self, kind: str, index: int | None, message: str) -> None:
        if len(self.faults) < self.max_faults:
            self.faults.append(AuditFault(kind, index, message))
        else:
            self.omitted += 1

    def open_checkpoint(self, note: str | None) -> Checkpoint | None:
        if note is None:
            self.fault("checkpoint", None, "no signed checkpoint to audit against")
            return None
        try:
            cp = open_checkpoint(note, self.checkpoint_keys, origin=self.origin)
        except (SigningError, LedgerError) as e:
            self.fault("checkpoint", None, f"latest checkpoint does not verify: {e}")
            return None
        self.checkpoint = cp
        self.wanted.add(cp.size)
        if self.state is not None:
            if self.state.origin != cp.origin:
                self.fault(
                    "state",
                    None,
                    f"trusted state is for origin {self.state.origin!r}, "
                    f"checkpoint origin is {cp.origin!r}",
                )
            self.wanted.add(self.state.size)
        return cp

    def feed(
        self, start: int, entries: Sequence[bytes | None], stored_leaves: Sequence[bytes | None]
    ) -> list[tuple[int, int, bytes]]:
        """Hash and append entries [start, start+len); return the complete nodes created.

        A missing entry (None) is replaced by its stored leaf hash when there is one, so
        the rebuild can go on; otherwise the rebuild stops there.
        """
        if self.verify_signatures:
            self._queue_signatures(start, entries)
        created: list[tuple[int, int, bytes]] = []
        if self.broken_at is not None:
            return created
        for offset, data in enumerate(entries):
            index = start + offset
            if data is None:
                stored = stored_leaves[offset] if offset < len(stored_leaves) else None
                self.fault("entry", index, f"entry {index}: missing from the log")
                if stored is None:
                    self.fault(
                        "entry", index, f"entry {index}: no leaf hash either; rebuild stops here"
                    )
                    self.broken_at = index
                    return created
                leaf = stored
            else:
                leaf = leaf_hash(data)
            created.extend(self.tree.append(leaf))
            if self.tree.size in self.wanted:
                self.roots[self.tree.size] = self.tree.root()
        return created

    def _queue_signatures(self, start: int, entries: Sequence[bytes | None]) -> None:
        for lo in range(0, len(entries), _SIG_TASK_ENTRIES):
            part = list(entries[lo : lo + _SIG_TASK_ENTRIES])
            if self.pool is None:
                for f in _verify_signatures(start + lo, part, self.trusted):
                    self.fault(f.kind, f.index, f.message)
            else:
                self.pending.append(
                    self.pool.submit(_verify_signatures, start + lo, part, self.trusted)
                )
        # Bound memory: keep at most a few tasks per worker in flight.
        limit = 4 * self.workers
        while len(self.pending) > limit:
            self._drain_one()

    def _drain_one(self) -> None:
        for f in self.pending.popleft().result():
            self.fault(f.kind, f.index, f.message)

    def compare_nodes(
        self,
        created: Sequence[tuple[int, int, bytes]],
        read: Callable[[int, int, int], list[bytes | None]],
    ) -> None:
        """Compare rebuilt complete nodes with stored ones.

        A mismatch is reported once, where it starts: a parent whose child mismatched is
        marked but not reported again.
        """
        by_level: dict[int, list[tuple[int, bytes]]] = {}
        for level, index, h in created:
            by_level.setdefault(level, []).append((index, h))
        for level in sorted(by_level):
            nodes = by_level[level]
            lo, hi = nodes[0][0], nodes[-1][0] + 1
            try:
                stored = read(level, lo, hi)
            except CertdError as e:
                self.fault("node", None, f"cannot read nodes ({level}, {lo}..{hi - 1}): {e}")
                continue
            for index, h in nodes:
                got = stored[index - lo]
                child_bad = False
                if level > 0:
                    for child in ((level - 1, 2 * index), (level - 1, 2 * index + 1)):
                        if child in self.mismatched:
                            self.mismatched.discard(child)
                            child_bad = True
                if got == h:
                    continue
                self.mismatched.add((level, index))
                if got is None:
                    what = f"entry {index}: leaf hash" if level == 0 else f"node ({level}, {index})"
                    self.fault("node", index << level, f"{what} missing from the store")
                elif child_bad:
                    continue  # explained by the mismatch below it, already reported
                elif level == 0:
                    self.fault(
                        "entry",
                        index,
                        f"entry {index}: stored leaf hash {got.hex()}, recomputed {h.hex()}",
                    )
                else:
                    self.fault(
                        "node",
                        index << level,
                        f"node ({level}, {index}): stored {got.hex()}, recomputed {h.hex()}",
                    )

    def finish(
        self,
        available: int,
        get_proof: Callable[[int, int], list[bytes]],
    ) -> None:
        """Compare roots with the checkpoint and the trusted state once all entries are in."""
        while self.pending:
            self._drain_one()
        self.close()
        cp = self.checkpoint
        if cp is None:
            return
        if available < cp.size:
            self.fault(
                "checkpoint",
                None,
                f"checkpoint size {cp.size} exceeds the {available} entries in the log",
            )
        root = self.roots.get(cp.size)
        if root is not None and root != cp.root_hash:
            self.fault(
                "checkpoint",
                None,
                f"checkpoint root mismatch at size {cp.size}: signed {cp.root_hash.hex()}, "
                f"recomputed {root.hex()}",
            )
        if root is None and self.broken_at is not None:
            self.fault(
                "checkpoint",
                None,
                f"cannot recompute the root at size {cp.size}: rebuild stopped at entry "
                f"{self.broken_at}",
            )
        self._check_state(cp, get_proof)

    def _check_state(self, cp: Checkpoint, get_proof: Callable[[int, int], list[bytes]]) -> None:
        state = self.state
        if state is None:
            return
        if state.size > cp.size:
            self.fault(
                "consistency",
                None,
                f"inconsistent with trusted checkpoint size {state.size}: the latest "
                f"checkpoint has the smaller size {cp.size} (rollback)",
            )
            return
        recomputed = self.roots.get(state.size)
        if recomputed is not None and recomputed != state.root_hash:
            self.fault(
                "consistency",
                None,
                f"inconsistent with trusted checkpoint size {state.size}: trusted root "
                f"{state.root_hash.hex()}, recomputed {recomputed.hex()}",
            )
        if 0 < state.size < cp.size:
            try:
                proof = get_proof(state.size, cp.size)
                verify_consistency(state.size, cp.size, proof, state.root_hash, cp.root_hash)
            except CertdError as e:
                self.fault(
                    "consistency",
                    None,
                    f"inconsistent with trusted checkpoint size {state.size}: consistency "
                    f"proof to size {cp.size} fails: {e}",
                )
        elif state.size == cp.size and state.root_hash != cp.root_hash:
            self.fault(
                "consistency",
                None,
                f"inconsistent with trusted checkpoint size {state.size}: trusted root "
                f"{state.root_hash.hex()}, signed root {cp.root_hash.hex()}",
            )

    def report(self, state_path: Path | None, entries_checked: int, t0: float) -> AuditReport:
        self.faults.sort(key=lambda f: (f.index is None, f.index or 0))
        ok = not self.faults and not self.omitted and self.checkpoint is not None
        updated = False
        cp = self.checkpoint
        if ok and state_path is not None and cp is not None:
            AuditState(cp.origin, cp.size, cp.root_hash).save(state_path)
            updated = True
        return AuditReport(
            ok=ok,
            origin=None if cp is None else cp.origin,
            checkpoint_size=None if cp is None else cp.size,
            root_hash=None if cp is None else self.roots.get(cp.size),
            entries_checked=entries_checked,
            faults=tuple(self.faults),
            faults_omitted=self.omitted,
            trusted_before=self.state,
            state_updated=updated,
            duration_s=time.monotonic() - t0,
        )


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
) -> _Audit:
    ring = _ring(trusted)
    keys = list(checkpoint_keys) if checkpoint_keys is not None else [t.key for t in ring]
    state: AuditState | None = None
    state_fault: str | None = None
    if state_path is not None:
        try:
            state = AuditState.load(state_path)
        except LedgerError as e:
            state_fault = str(e)
    audit = _Audit(
        ring,
        keys,
        origin,
        state,
        verify_signatures=verify_signatures,
        workers=workers if workers is not None else (os.cpu_count() or 1),
        max_faults=max_faults,
    )
    if state_fault is not None:
        audit.fault("state", None, f"trusted state unusable: {state_fault}")
    return audit


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
            None for one per CPU.
        chunk_entries: entries read per step, at most the store's read limit.
        max_faults: faults kept in the report; more are counted only.

    Raises:
        LedgerError: the state file cannot be written after a passing audit.

    Returns:
        The report; ``ok`` is True only when no fault was found.
    """
    t0 = time.monotonic()
    chunk = max(1, min(chunk_entries, store.limits.max_read_entries))
    audit = _start(
        trusted, checkpoint_keys, origin, state_path, verify_signatures, workers, max_faults
    )
    try:
        try:
            latest = store.latest_checkpoint()
        except CertdError as e:
            audit.fault("checkpoint", None, f"cannot read the latest checkpoint: {e}")
            latest = None
        audit.open_checkpoint(None if latest is None else latest[1])
        size = store.size()
        for item in store.unexplained(limit=max_faults):
            audit.fault("store", None, f"the store holds state its tree does not explain: {item}")
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
        try:
            note: str | None = get_checkpoint()
        except CertdError as e:
            audit.fault("checkpoint", None, f"cannot fetch the latest checkpoint: {e}")
            note = None
        cp = audit.open_checkpoint(note)
        size = 0 if cp is None else cp.size
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
        audit.finish(position, get_consistency_proof)
    finally:
        audit.close()
    return audit.report(state_path, position, t0)
