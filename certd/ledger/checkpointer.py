"""The ledger's checkpoints: sign one only if it extends the last, adopt other replicas' ones.

Example:
    >>> from certd.ledger.store.sqlite import SQLiteStore
    >>> from certd.signing.keys import SigningKey
    >>> key = SigningKey.generate("certd.example/log")
    >>> store = SQLiteStore(":memory:")
    >>> cps = Checkpointer(store, key, "certd.example/log")
    >>> cps.start()
    >>> store.append([("k", b"entry")])
    0
    >>> with cps.lock:
    ...     cps.sign_up_to(1)
    >>> cps.latest().checkpoint.size
    1

A log must never sign a checkpoint inconsistent with one it signed before
(c2sp.org/tlog-checkpoint). Before each append the committer checks that the stored tree still
has the latest checkpoint's root (``check_store_matches_latest``); after it, ``sign_up_to``
checks that a consistency proof built from the store links the latest checkpoint to the new
root. On failure it raises ConsistencyError, signs nothing, and the ledger refuses further
appends (fail-stop, ``failed``); reads keep working.

Shared stores: ``refresh_latest`` adopts the largest checkpoint any replica stored, after
checking its signature, that the store still has its root, and a consistency proof from the
checkpoint held before. With a ``checkpoint_file`` the latest checkpoint signed or adopted is
also remembered on local disk, and a store that does not extend it is refused at start-up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from certd.atomicfile import write_atomic
from certd.errors import (
    CertdError,
    ConsistencyError,
    LedgerError,
    NotFoundError,
    ProofError,
    StoreDamageError,
    StoreError,
)
from certd.ledger.startup_check import StoreVerifier, save_mark, verify_store
from certd.ledger.store import LedgerStore
from certd.signing.keys import SigningKey, VerifierKey
from certd.tlog import (
    EMPTY_ROOT,
    Checkpoint,
    CompactRange,
    SignedCheckpoint,
    consistency_proof,
    open_checkpoint,
    sign_checkpoint,
    verify_consistency,
)

__all__ = ["Checkpointer"]

log = logging.getLogger("certd.ledger")


class Checkpointer:
    """The latest signed checkpoint of a ledger, and the only way a new one is signed.

    ``lock`` serialises signing with appends: hold it around an append and its
    ``sign_up_to``. ``failed`` is set once a consistency check fails (fail-stop).
    """

    def __init__(
        self,
        store: LedgerStore,
        signer: SigningKey,
        origin: str,
        *,
        checkpoint_file: Path | None = None,
        refresh_interval_s: float = 0.05,
        previous_keys: Sequence[VerifierKey] = (),
        verified_mark: Path | None = None,
    ) -> None:
        Checkpoint(origin, 0, EMPTY_ROOT)  # validates the origin line
        self._store = store
        self._signer = signer
        self._verifiers = [signer.verifier(), *previous_keys]
        self.origin = origin
        self.lock = threading.Lock()
        self.failed: LedgerError | None = None
        self._checkpoint_file = checkpoint_file
        self._refresh_interval_s = refresh_interval_s
        self._refresh_lock = threading.Lock()
        self._refreshed_at = 0.0
        self._latest: SignedCheckpoint | None = None
        self._mark = verified_mark
        self._verifier: StoreVerifier | None = None
        self.latest_at = time.time()

    def start(self) -> None:
        """Prove the store against its latest checkpoint, then cover every stored entry.

        Every row past the "verified up to" mark is re-read and re-hashed
        (``certd.ledger.startup_check``); the mark then moves to the store's size.

        Raises:
            SigningError: the latest stored checkpoint does not verify.
            LedgerError: its origin differs, or the remembered checkpoint cannot be read.
            ConsistencyError: the stored tree does not match the latest checkpoint.
            StoreError: the store failed.
        """
        remembered = self._load_file()
        self._latest = remembered
        with self.lock:
            self._check_store_explained()
            try:
                self._verifier = verify_store(self._store, self._verifiers, self.origin, self._mark)
            except StoreDamageError as e:
                raise self.fail(
                    f"refusing to start: {e}; run `certd audit` and repair the store "
                    "before serving",
                    e,
                ) from e
            self.refresh_latest(verified=remembered is None)
            self.check_store_matches_latest()
            self.sign_up_to(self._store.size())
            try:
                save_mark(self._mark, self.origin, self._verifier)
            except OSError as e:
                raise LedgerError(f"cannot record the verified-up-to mark: {e}") from e

    def latest(self) -> SignedCheckpoint:
        """The latest checkpoint held (signed or adopted), without looking for a newer one."""
        latest = self._latest
        assert latest is not None  # set by start()
        return latest

    # -- reading ------------------------------------------------------------------------------

    def checkpoint(self) -> SignedCheckpoint:
        """The latest signed checkpoint, adopting a newer one at most every refresh interval."""
        if (
            self._store.shared
            and time.monotonic() - self._refreshed_at >= self._refresh_interval_s
            and self.failed is None
        ):
            try:
                self.refresh_latest()
            except CertdError as e:  # serve the checkpoint held; appends fail-stop if needed
                log.warning("cannot adopt a newer checkpoint: %s", e)
        return self.latest()

    def refresh(self) -> SignedCheckpoint:
        """Adopt the newest checkpoint in a shared store now (see ``Ledger.refresh``)."""
        if self._store.shared and self.failed is None:
            try:
                self.refresh_latest()
            except CertdError as e:  # serve the checkpoint held; appends fail-stop if needed
                log.warning("cannot adopt a newer checkpoint: %s", e)
        return self.latest()

    def cover(self, index: int) -> SignedCheckpoint:
        """A signed checkpoint that covers an entry, signing one if needed (``Ledger.cover``)."""
        latest = self.checkpoint()
        if index < latest.checkpoint.size:
            return latest
        with self.lock:
            if self.failed is not None:
                raise self.failed
            if self._store.shared:
                self.refresh_latest()
            self.check_store_matches_latest()
            size = self._store.size()
            if not 0 <= index < size:
                raise NotFoundError(f"expected an entry index below {size}, got {index}")
            self.sign_up_to(size)
        return self.checkpoint()

    def checkpoint_at(self, size: int) -> SignedCheckpoint:
        """The stored signed checkpoint for a tree size (``Ledger.checkpoint_at``)."""
        note = self._store.checkpoint_at(size)
        checkpoint = open_checkpoint(note, self._verifiers, origin=self.origin)
        if checkpoint.size != size:
            raise LedgerError(
                f"expected the checkpoint stored at size {size} to have that size, "
                f"got {checkpoint.size}"
            )
        return SignedCheckpoint(note, checkpoint)

    # -- checks and signing -------------------------------------------------------------------

    def _open(self, size: int, note: str) -> SignedCheckpoint:
        checkpoint = open_checkpoint(note, self._verifiers, origin=self.origin)
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
        checkpoint = open_checkpoint(note, self._verifiers, origin=self.origin)
        return SignedCheckpoint(note, checkpoint)

    def _remember(self, signed: SignedCheckpoint) -> None:
        """Make ``signed`` the latest checkpoint (never a smaller one) and record it on disk."""
        current = self._latest
        if current is not None and current.checkpoint.size >= signed.checkpoint.size:
            return
        self._latest = signed
        self.latest_at = time.time()
        path = self._checkpoint_file
        if path is not None:
            try:
                write_atomic(path, signed.note.encode("utf-8"))
            except OSError as e:
                raise LedgerError(f"cannot record the checkpoint in {path}: {e}") from e

    def refresh_latest(self, verified: bool = False) -> None:
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
            if current is not None or not verified:
                self._check_root(signed.checkpoint, "stored checkpoint")
            if current is not None and current.checkpoint.size > 0:
                self._check_extends(current.checkpoint, signed.checkpoint)
            self._remember(signed)

    def _check_root(self, checkpoint: Checkpoint, what: str) -> None:
        """Fail unless the stored tree at the checkpoint's size has its root."""
        size = checkpoint.size
        try:
            root = self._store.root(size)
        except StoreError:
            # The backend did not answer (a Redis restart, say): no evidence of a fork, and
            # nothing is signed without this check passing, so the caller's request fails
            # (UNAVAILABLE) and the next one checks again; not fail-stop.
            raise
        except CertdError as e:
            raise self.fail(f"cannot recompute the root at size {size}: {e}", e) from e
        if root != checkpoint.root_hash:
            raise self.fail(
                f"expected the stored root at size {size} to be "
                f"{checkpoint.root_hash.hex()} ({what}), got {root.hex()}"
            )

    def _check_extends(self, old: Checkpoint, new: Checkpoint) -> None:
        """Fail unless the store proves ``new`` consistent with ``old``."""
        try:
            proof = self._store.batched(
                lambda node_fn: consistency_proof(old.size, new.size, node_fn)
            )
            verify_consistency(old.size, new.size, proof, old.root_hash, new.root_hash)
        except ProofError as e:
            raise self.fail(
                f"the stored checkpoint at size {new.size} is not consistent with the "
                f"one at size {old.size}: {e}",
                e,
            ) from e

    def fail(self, message: str, cause: BaseException | None = None) -> ConsistencyError:
        """Stop the ledger's appends (fail-stop) with a consistency error, and return it."""
        error = ConsistencyError(message)
        error.__cause__ = cause
        self.failed = error  # read by appends; a plain assignment, no lock needed
        return error

    def check_store_matches_latest(self) -> None:
        """Refuse to go on unless the stored tree still has the latest checkpoint's root."""
        if self._latest is None:
            return
        signed = self._latest.checkpoint
        stored_size = self._store.size()
        if stored_size < signed.size:
            raise self.fail(
                f"expected at least {signed.size} stored entries (latest checkpoint), "
                f"got {stored_size}"
            )
        self._check_root(signed, "latest checkpoint")

    def _check_store_explained(self) -> None:
        """Refuse to start on a store holding rows beyond its tree (fail-stop, not UNAVAILABLE).

        Such a row (a junk entry at ``idx = size``, say) would make every later append fail;
        the operator must look (``certd audit`` names each row) and repair the store.
        """
        strays = self._store.unexplained()
        if strays:
            raise self.fail(
                "refusing to start: the ledger store holds state its tree does not explain ("
                + "; ".join(strays)
                + "); run `certd audit` and repair the store before serving"
            )

    def _recompute(self, size: int) -> bytes:
        """The root at ``size`` recomputed from the stored rows (read back, re-hashed)."""
        verifier = self._verifier
        if verifier is None:
            verifier = self._verifier = StoreVerifier(self._store, CompactRange())
        try:
            verifier.advance(size)
        except StoreDamageError as e:
            raise self.fail(f"refusing to sign size {size}: {e}", e) from e
        root = verifier.root()
        if root != self._store.root(size):
            raise self.fail(
                f"refusing to sign size {size}: the stored nodes give another root than the entries"
            )
        return root

    def sign_up_to(self, size: int) -> None:
        """Sign and store a checkpoint for ``size`` after proving it extends the latest one.

        The caller holds ``lock``.
        """
        current = self._latest
        if current is not None and current.checkpoint.size >= size:
            return  # covered by a checkpoint already checked (another replica's, or ours)
        root = self._recompute(size)
        # Every tree extends the empty one, so a size-0 checkpoint needs no proof.
        if current is not None and current.checkpoint.size > 0:
            old = current.checkpoint
            try:
                proof = self._store.batched(  # _recompute read the entries up to size
                    lambda node_fn: consistency_proof(old.size, size, node_fn), within=size
                )
                verify_consistency(old.size, size, proof, old.root_hash, root)
            except ProofError as e:
                raise self.fail(
                    f"refusing to sign size {size}: not consistent with the checkpoint "
                    f"at size {old.size}: {e}",
                    e,
                ) from e
        checkpoint = Checkpoint(self.origin, size, root)
        note = sign_checkpoint(checkpoint, self._signer)
        self._store.put_checkpoint(size, note)
        self._remember(SignedCheckpoint(note, checkpoint))
