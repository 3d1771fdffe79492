"""The audit's engine: rebuild the tree entry by entry, compare nodes, check signatures.

Example (through ``certd.ledger.audit``, which drives it)::

    report = audit_store(store, KeyRing([log_key]), state_path)

``AuditRun`` takes entries in order (``feed``), rebuilds the tree with a ``CompactRange``,
compares the complete nodes it creates with the stored ones (``compare_nodes``), checks the
entries' signatures in worker processes, and ``finish`` compares the roots with the signed
checkpoint and the auditor's trusted state. Given a way to open the store (``opener``), the
workers read their own chunks and return leaf hashes and checked subtree roots instead
(``chunks``, ``take_chunk``; ``certd.ledger.auditchunk``), and the tree is checked once here.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from pathlib import Path

from certd.errors import CertdError, LedgerError, SigningError
from certd.keyrotation import Rotation, follow, open_rotation, outside_windows
from certd.ledger.auditchunk import (
    ChunkResult,
    Signers,
    audit_chunk,
    init_worker,
    verify_signatures,
)
from certd.ledger.auditstate import AuditFault, AuditReport, AuditState
from certd.ledger.store import LedgerStore
from certd.signing.dsse import KeyRing
from certd.signing.keys import VerifierKey, enable_fast_verify
from certd.tlog import (
    EMPTY_ROOT,
    Checkpoint,
    CompactRange,
    leaf_hash,
    open_checkpoint,
    verify_consistency,
)

__all__ = ["AuditRun"]

_SIG_TASK_ENTRIES = 2048


class AuditRun:
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
        opener: Callable[[], LedgerStore] | None = None,
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
        if verify_signatures:
            enable_fast_verify()  # bulk verification: a verifier prepared per key
        self.workers = workers
        # Worker processes parse and verify envelopes in parallel with the rebuild (threads
        # would serialise the JSON parsing on the GIL); forkserver: never fork a threaded parent.
        # With an opener the workers read their chunks from the store themselves.
        self.pool: Executor | None = None
        self.opener = opener
        if workers > 1 and (verify_signatures or opener is not None):
            self.pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("forkserver"),
                initializer=init_worker,
                initargs=(opener, trusted),
            )
        self.pending: deque[Future[tuple[list[AuditFault], Signers, list[tuple[int, bytes]]]]]
        self.pending = deque()
        self.signers: Signers = []
        self.rotation_entries: list[tuple[int, bytes]] = []
        self.note: str | None = None
        self.mismatched: set[tuple[int, int]] = set()

    def close(self) -> None:
        """Stop the worker processes (also when the audit is cut short by an error)."""
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
        self.checkpoint, self.note = cp, note
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
        self,
        start: int,
        entries: Sequence[bytes | None],
        stored_leaves: Sequence[bytes | None],
        *,
        signatures: bool = True,
    ) -> list[tuple[int, int, bytes]]:
        """Hash and append entries [start, start+len); return the complete nodes created.

        A missing entry (None) is replaced by its stored leaf hash when there is one, so
        the rebuild can go on; otherwise the rebuild stops there. ``signatures=False``: the
        caller has checked them (``take_signatures``).
        """
        if self.verify_signatures and signatures:
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

    def take_signatures(self, start: int, entries: Sequence[bytes | None]) -> None:
        """Check the signatures of entries [start, start+len) in this process."""
        if self.verify_signatures:
            self._take(verify_signatures(start, entries, self.trusted))

    def _queue_signatures(self, start: int, entries: Sequence[bytes | None]) -> None:
        for lo in range(0, len(entries), _SIG_TASK_ENTRIES):
            part = list(entries[lo : lo + _SIG_TASK_ENTRIES])
            if self.pool is None:
                self._take(verify_signatures(start + lo, part, self.trusted))
            else:
                self.pending.append(
                    self.pool.submit(verify_signatures, start + lo, part, self.trusted)
                )
        # Bound memory: keep at most a few tasks per worker in flight.
        limit = 4 * self.workers
        while len(self.pending) > limit:
            self._drain_one()

    def chunks(self, size: int, chunk: int) -> Iterator[ChunkResult]:
        """Hand ``[0, size)`` to the workers chunk by chunk (they read the store through the
        opener); yield their results in order, a few chunks a worker in flight."""
        assert self.pool is not None and self.opener is not None
        in_flight: deque[Future[ChunkResult]] = deque()
        for start in range(0, size, chunk):
            end = min(size, start + chunk)
            in_flight.append(self.pool.submit(audit_chunk, start, end, self.verify_signatures))
            if len(in_flight) > 3 * self.workers:
                yield in_flight.popleft().result()
        while in_flight:
            yield in_flight.popleft().result()

    def take_chunk(self, result: ChunkResult) -> list[tuple[int, int, bytes]]:
        """Take a worker's chunk (``chunks``; its leaves are not None); return the complete
        nodes created that the worker has not already compared with the stored ones.

        A chunk whose stored subtree matched is appended by its root, unless the root at a
        size inside it is wanted; otherwise its leaves are appended one by one and every
        node they create is returned, for ``compare_nodes`` to name the first wrong one.
        """
        self._take((result.faults, result.signers, result.rotations))
        leaves = result.leaves
        assert leaves is not None
        if self.broken_at is not None:
            return []
        start, end = result.start, result.start + len(leaves)
        inside = any(start < size < end for size in self.wanted)
        if result.root is not None and not inside and self.tree.size == start:
            merged = self.tree.append_subtree(len(leaves).bit_length() - 1, result.root)
            if self.tree.size in self.wanted:
                self.roots[self.tree.size] = self.tree.root()
            return merged[1:]
        created: list[tuple[int, int, bytes]] = []
        for leaf in leaves:
            created.extend(self.tree.append(leaf))
            if self.tree.size in self.wanted:
                self.roots[self.tree.size] = self.tree.root()
        return created

    def _drain_one(self) -> None:
        self._take(self.pending.popleft().result())

    def _take(self, result: tuple[list[AuditFault], Signers, list[tuple[int, bytes]]]) -> None:
        faults, runs, rotations = result
        for f in faults:
            self.fault(f.kind, f.index, f.message)
        self.signers.extend(runs)
        self.rotation_entries.extend(rotations)

    def check_rotations(self) -> None:
        """Follow the log's key rotations and refuse what a key signed outside its window.

        Entries: the outgoing key up to the rotation's index, the incoming key after it.
        The latest checkpoint (size n): the key that may sign entry n - 1.
        """
        ring = self.trusted
        rotations: list[Rotation] = []
        for index, data in sorted(self.rotation_entries):
            try:
                rotations.append(open_rotation(data, follow(ring, rotations), index))
            except SigningError as e:
                self.fault("signature", index, f"entry {index}: key rotation refused: {e}")
        if not rotations:
            return
        ring = follow(ring, rotations)
        for start, end, keyids in self.signers:
            for index in outside_windows(ring, keyids, start, end):
                self.fault(
                    "signature",
                    index,
                    f"entry {index} is signed by {', '.join(sorted(keyids))}, not the log key "
                    f"at that index (RotatedKeyError: key rotations at entries "
                    f"{', '.join(str(r.index) for r in rotations)})",
                )
        cp = self.checkpoint
        if cp is not None and self.note is not None and cp.size > 0:
            in_force = [t.key for t in ring if t.valid_at_index(cp.size - 1)]
            try:
                open_checkpoint(self.note, in_force, origin=self.origin)
            except (SigningError, LedgerError) as e:
                self.fault(
                    "checkpoint",
                    None,
                    f"latest checkpoint (size {cp.size}) is not signed by the log key in "
                    f"force at entry {cp.size - 1} (RotatedKeyError): {e}",
                )

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
        if self.verify_signatures:
            self.check_rotations()
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
