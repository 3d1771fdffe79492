"""A witness: cosigns a log's checkpoints after checking each extends the last one it cosigned.

Example:
    >>> import pathlib, tempfile
    >>> from certd.tlog import Checkpoint, sign_checkpoint
    >>> from certd.tlog import EMPTY_ROOT
    >>> from certd.signing.keys import SigningKey
    >>> log_key = SigningKey.generate("log.example/log")
    >>> w = Witness(SigningKey.generate("witness.example/w1"), [log_key.verifier()],
    ...             "log.example/log", pathlib.Path(tempfile.mkdtemp()) / "state.json")
    >>> note = sign_checkpoint(Checkpoint("log.example/log", 0, EMPTY_ROOT), log_key)
    >>> cosigned = w.observe(note, lambda a, b: [])
    >>> w.state.size, cosigned.count("\\u2014 ")
    (0, 2)

Rules (c2sp.org/tlog-witness, pull model): the witness opens each checkpoint with the log's
keys; a checkpoint at the size it last cosigned must have the same root; a larger one must
come with a consistency proof from that size that verifies; a smaller one is refused (the
witness never goes back). Only then does it cosign (c2sp.org/tlog-cosignature, Ed25519
type 0x04) and record the new checkpoint. The state file is replaced atomically (write,
fsync, rename, fsync the directory) *before* the cosignature is released, so a crash never
leaves the witness able to cosign a fork of what it already cosigned.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from certd.atomicfile import write_atomic
from certd.errors import ConsistencyError, LedgerError, ProofError
from certd.opening import open_log_checkpoint
from certd.signing.dsse import KeyRing
from certd.signing.keys import SigningKey, VerifierKey
from certd.signing.note import add_signature_lines, cosign
from certd.tlog import Checkpoint, verify_consistency

__all__ = ["Witness", "WitnessState"]

ConsistencyFn = Callable[[int, int], Sequence[bytes]]


@dataclass(frozen=True)
class WitnessState:
    """The last checkpoint a witness cosigned.

    Attributes:
        origin: the log origin.
        size: its tree size.
        root_hash: its root.
        note: the checkpoint note with the witness's cosignature.
    """

    origin: str
    size: int
    root_hash: bytes
    note: str


class Witness:
    """Follows one log; thread-safe."""

    def __init__(
        self,
        key: SigningKey,
        log_keys: Iterable[VerifierKey],
        origin: str,
        state_path: Path,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Load the state (if any).

        Args:
            key: the witness's cosigning key.
            log_keys: the log's trusted keys.
            origin: the log's origin line.
            state_path: where the last cosigned checkpoint is kept.
            clock: the time source for cosignature timestamps.

        Raises:
            LedgerError: the state file is unreadable or for another log.
        """
        self.key = key
        self._log_keys = KeyRing(log_keys)
        self.origin = origin
        self._path = state_path
        self._clock = clock
        self._lock = threading.Lock()
        self._state = self._load()

    @property
    def state(self) -> WitnessState | None:
        """The last cosigned checkpoint, or None before the first."""
        return self._state

    @property
    def verifier(self) -> VerifierKey:
        """The cosigner key clients trust (signature type 0x04)."""
        return self.key.cosigner_verifier()

    def _load(self) -> WitnessState | None:
        if not self._path.exists():
            return None
        try:
            data = json.loads(self._path.read_text(encoding="utf-8"))
            state = WitnessState(
                str(data["origin"]), int(data["size"]), bytes.fromhex(data["root_hash"]),
                str(data["note"]),
            )  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise LedgerError(f"witness state {self._path}: {e}") from e
        if state.origin != self.origin:
            raise LedgerError(
                f"witness state {self._path}: expected origin {self.origin!r}, got {state.origin!r}"
            )
        return state

    def _store(self, state: WitnessState) -> None:
        data = {
            "origin": state.origin,
            "size": state.size,
            "root_hash": state.root_hash.hex(),
            "note": state.note,
        }
        try:
            write_atomic(self._path, json.dumps(data, sort_keys=True).encode("utf-8"))
        except OSError as e:
            raise LedgerError(f"cannot record the witness state in {self._path}: {e}") from e

    def observe(self, note: str, consistency: ConsistencyFn) -> str:
        """Check a checkpoint against the last cosigned one, cosign it, record it.

        Args:
            note: the log's signed checkpoint note.
            consistency: returns the log's consistency proof between two sizes.

        Raises:
            SigningError: the note is not signed by a trusted log key.
            LedgerError: the note is not a checkpoint of this log.
            ConsistencyError: it is older than, or not consistent with, the last cosigned
                checkpoint (a fork); nothing is cosigned.

        Returns:
            The note with this witness's cosignature appended.
        """
        cp = open_log_checkpoint(note, self._log_keys, self.origin)  # the one trust path
        with self._lock:
            old = self._state
            if old is not None:
                self._check(old, cp, consistency)
                if cp.size == old.size:
                    return old.note
            line = cosign(cp.to_text(), self.key, int(self._clock()))
            cosigned = add_signature_lines(note, [line])
            state = WitnessState(self.origin, cp.size, cp.root_hash, cosigned)
            self._store(state)
            self._state = state
            return cosigned

    @staticmethod
    def _check(old: WitnessState, cp: Checkpoint, consistency: ConsistencyFn) -> None:
        if cp.size < old.size:
            raise ConsistencyError(
                f"refusing to cosign size {cp.size}: older than the cosigned size {old.size}"
            )
        if cp.size == old.size:
            if cp.root_hash != old.root_hash:
                raise ConsistencyError(
                    f"fork: the log signed two roots at size {cp.size} "
                    f"({old.root_hash.hex()} cosigned, {cp.root_hash.hex()} now)"
                )
            return
        if old.size == 0:
            return  # every tree extends the empty one
        try:
            proof = list(consistency(old.size, cp.size))
            verify_consistency(old.size, cp.size, proof, old.root_hash, cp.root_hash)
        except ProofError as e:
            raise ConsistencyError(
                f"fork: size {cp.size} is not consistent with the cosigned size {old.size}: {e}"
            ) from e
