"""The ratchet's trusted state, and how it moves: pure decisions, no I/O, kept on disk.

Example:
    >>> import tempfile, pathlib
    >>> state = RatchetState(log="e0b1fcfa@certd.example/log")
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "ratchet.json"
    >>> state.save(path)
    >>> RatchetState.load(path, log="e0b1fcfa@certd.example/log") == state
    True

Following python-tuf's ngclient, the state machine never fetches: ``plan`` decides whether a
set of signed checkpoints is consistent with the trusted one using only the consistency
proofs it is handed (attached to the record, or fetched by the caller), and says which proof
it misses (``MissingProof``) so that the caller can fetch it and ask again. The state holds:

* ``trusted``: the newest checkpoint proven consistent with every one trusted before;
* ``known``: the root of every older size proven a prefix of ``trusted`` (so records of an
  already-admitted file re-verify offline);
* ``coverage``: per task digest, the families admitted so far (it never shrinks);
* ``witnessed``: the newest checkpoint a witness quorum cosigned;
* ``heads``: per training run, the last promoted acceptance certificate id.

It is written with ``certd.atomicfile.write_atomic`` and refuses to load a state of
another log (``log`` names the trusted key ids and origin).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from certd import tlog
from certd.atomicfile import write_atomic
from certd.errors import (
    BadSignatureError,
    CertdError,
    MalformedStatementError,
    ProofError,
    RootMismatchError,
    TamperedError,
    UnknownKeyError,
    WrongPredicateError,
)
from certd.tlog import Checkpoint

from .errors import VerificationError

__all__ = [
    "MissingProof",
    "PlanRefused",
    "Proofs",
    "RatchetState",
    "Reason",
    "Refused",
    "TrustedCheckpoint",
    "check_prefix",
    "parse_proofs",
    "plan",
    "proofs_json",
    "refusal",
    "refusal_of_plan",
]


class Reason(enum.StrEnum):
    """Why the ratchet refused a record or a checkpoint (docs/ratchet.md has the table)."""

    MALFORMED = "MALFORMED"
    UNKNOWN_KEY = "UNKNOWN_KEY"
    BAD_SIGNATURE = "BAD_SIGNATURE"
    WRONG_SUBJECT = "WRONG_SUBJECT"
    REPLAYED = "REPLAYED"
    TAMPERED_WITNESS = "TAMPERED_WITNESS"
    TAMPERED_LABEL = "TAMPERED_LABEL"
    TAMPERED_CERTIFICATE_ID = "TAMPERED_CERTIFICATE_ID"
    TAMPERED_INDEX = "TAMPERED_INDEX"
    TAMPERED_RECEIPT = "TAMPERED_RECEIPT"
    TAMPERED_TASK_DIGEST = "TAMPERED_TASK_DIGEST"
    TAMPERED_CHECKPOINT = "TAMPERED_CHECKPOINT"
    TAMPERED_FEASIBLE = "TAMPERED_FEASIBLE"
    DUPLICATE_FAMILY = "DUPLICATE_FAMILY"
    WRONG_KAPPA = "WRONG_KAPPA"
    BAD_PROOF = "BAD_PROOF"
    STALE_CHECKPOINT = "STALE_CHECKPOINT"
    INCONSISTENT_CHECKPOINT = "INCONSISTENT_CHECKPOINT"
    UNPROVEN_CHECKPOINT = "UNPROVEN_CHECKPOINT"
    COVERAGE_SHRANK = "COVERAGE_SHRANK"
    NO_CERTIFICATE = "NO_CERTIFICATE"
    WRONG_CHECKPOINT = "WRONG_CHECKPOINT"
    WRONG_RUN = "WRONG_RUN"
    BROKEN_CHAIN = "BROKEN_CHAIN"
    UNWITNESSED_CHECKPOINT = "UNWITNESSED_CHECKPOINT"


class Refused(Exception):
    """One refusal: a reason and a one-line detail."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


_TAMPERED = {
    "certificate_id": Reason.TAMPERED_CERTIFICATE_ID,
    "ledger_index": Reason.TAMPERED_INDEX,
    "witness": Reason.TAMPERED_WITNESS,
    "batch_root": Reason.TAMPERED_RECEIPT,
    "batch_size": Reason.TAMPERED_RECEIPT,
    "inclusion.checkpoint.origin": Reason.TAMPERED_CHECKPOINT,
    "inclusion.checkpoint.size": Reason.TAMPERED_CHECKPOINT,
    "inclusion.checkpoint.rootHash": Reason.TAMPERED_CHECKPOINT,
}


def refusal(e: CertdError) -> Refused:
    """The ratchet's reason for an error of ``certd.statements`` (one mapping for all)."""
    if isinstance(e, TamperedError):
        reason = _TAMPERED.get(e.field, Reason.TAMPERED_LABEL)
    elif isinstance(e, UnknownKeyError):
        reason = Reason.UNKNOWN_KEY
    elif isinstance(e, BadSignatureError):
        reason = Reason.BAD_SIGNATURE
    elif isinstance(e, WrongPredicateError):
        reason = Reason.WRONG_SUBJECT
    elif isinstance(e, MalformedStatementError):
        reason = Reason.MALFORMED
    else:  # ProofError, a checkpoint's SigningError, another origin (InvalidInputError)
        reason = Reason.BAD_PROOF
    return Refused(reason, str(e))


def refusal_of_plan(e: MissingProof | PlanRefused) -> Refused:
    """The ratchet's reason when checkpoints do not fit the trusted state."""
    if isinstance(e, MissingProof):
        if e.newer:
            return Refused(
                Reason.UNPROVEN_CHECKPOINT,
                f"no consistency proof for {e.first} → {e.second} (attach one or use --server)",
            )
        return Refused(
            Reason.STALE_CHECKPOINT,
            f"proof at tree size {e.first}, older than the trusted size {e.second}, "
            "and no consistency proof links them",
        )
    return Refused(Reason.INCONSISTENT_CHECKPOINT if e.inconsistent else Reason.BAD_PROOF, str(e))


Proofs = Mapping[tuple[int, int], Sequence[bytes]]
"""Consistency proofs by (first size, second size)."""


@dataclass(frozen=True, slots=True)
class TrustedCheckpoint:
    """A checkpoint the ratchet trusts (size and root)."""

    size: int
    root_hash: bytes


class MissingProof(Exception):
    """The decision needs the consistency proof ``first`` → ``second``, which nobody gave.

    Attributes:
        first: the smaller tree size.
        second: the larger tree size.
        newer: True when the proof would move the trusted checkpoint forward (the refusal
            is ``UNPROVEN_CHECKPOINT``), False for an older checkpoint (``STALE_CHECKPOINT``).
    """

    def __init__(self, first: int, second: int, *, newer: bool) -> None:
        super().__init__(f"no consistency proof for {first} → {second}")
        self.first, self.second, self.newer = first, second, newer


class PlanRefused(Exception):
    """A checkpoint forks from the trusted state (``inconsistent``) or a proof is malformed."""

    def __init__(self, message: str, *, inconsistent: bool) -> None:
        super().__init__(message)
        self.inconsistent = inconsistent


def _prove(proofs: Proofs, size1: int, root1: bytes, size2: int, root2: bytes, newer: bool) -> None:
    proof = proofs.get((size1, size2))
    if proof is None:
        raise MissingProof(size1, size2, newer=newer)
    try:
        tlog.verify_consistency(size1, size2, list(proof), root1, root2)
    except RootMismatchError as e:
        raise PlanRefused(
            f"tree size {size1} is not consistent with size {size2}: expected root "
            f"{e.expected.hex()[:16]}…, the proof leads to {e.got.hex()[:16]}…",
            inconsistent=True,
        ) from e
    except ProofError as e:
        raise PlanRefused(
            f"malformed consistency proof {size1} → {size2}: {e}", inconsistent=False
        ) from e


def check_prefix(
    cp: Checkpoint, trusted: TrustedCheckpoint, known: dict[int, bytes], proofs: Proofs
) -> None:
    """Check that ``cp`` (no newer than ``trusted``) is a prefix of it.

    Raises:
        MissingProof: its root is not known and no proof ``cp.size → trusted.size`` is given.
        PlanRefused: its root differs from the one known for its size, or the proof fails.
    """
    if cp.size == trusted.size or cp.size in known:
        root = trusted.root_hash if cp.size == trusted.size else known[cp.size]
        if root != cp.root_hash:
            raise PlanRefused(
                f"root at size {cp.size} differs from the trusted one "
                f"({root.hex()[:16]}… vs {cp.root_hash.hex()[:16]}…)",
                inconsistent=True,
            )
        return
    _prove(proofs, cp.size, cp.root_hash, trusted.size, trusted.root_hash, newer=False)


def plan(
    trusted: TrustedCheckpoint | None,
    known: Mapping[int, bytes],
    checkpoints: Iterable[Checkpoint],
    proofs: Proofs,
) -> tuple[TrustedCheckpoint | None, dict[int, bytes]]:
    """Decide whether ``checkpoints`` fit the trusted state; return the state they lead to.

    The newest checkpoint moves the trusted one forward (trust on first use when there is
    none) with a proof ``trusted → newest``; every other must be a prefix of the new trusted
    one: its root known, or a proof ``size → trusted``.

    Raises:
        MissingProof: a proof the caller may fetch and hand in.
        PlanRefused: a checkpoint forks from the trusted state, or a proof is malformed.

    Returns:
        (the new trusted checkpoint, the new known roots).
    """
    new_known = dict(known)
    cps = sorted(checkpoints, key=lambda c: c.size, reverse=True)
    if not cps:
        return trusted, new_known
    top = cps[0]
    if trusted is None:
        trusted = TrustedCheckpoint(top.size, top.root_hash)
    elif top.size > trusted.size:
        _prove(proofs, trusted.size, trusted.root_hash, top.size, top.root_hash, newer=True)
        new_known[trusted.size] = trusted.root_hash
        trusted = TrustedCheckpoint(top.size, top.root_hash)
    for cp in cps:
        check_prefix(cp, trusted, new_known, proofs)
        if cp.size != trusted.size:
            new_known[cp.size] = cp.root_hash
    return trusted, new_known


def parse_proofs(items: object) -> dict[tuple[int, int], list[bytes]]:
    """Proofs from a record's ``consistency`` list (``{"first", "second", "hashes": [hex]}``).

    Raises:
        ValueError: the list is malformed.
    """
    if items is None:
        return {}
    if not isinstance(items, list):
        raise ValueError("consistency: expected a list")
    out: dict[tuple[int, int], list[bytes]] = {}
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("consistency: expected objects")
        first, second, hashes = item["first"], item["second"], item["hashes"]
        if not (isinstance(first, int) and isinstance(second, int) and isinstance(hashes, list)):
            raise ValueError("consistency: expected integer sizes and a list of hashes")
        out[(first, second)] = [bytes.fromhex(str(h)) for h in hashes]
    return out


def proofs_json(proofs: Proofs) -> list[dict[str, Any]]:
    """The ``consistency`` list a record carries (inverse of ``parse_proofs``)."""
    return [
        {"first": a, "second": b, "hashes": [h.hex() for h in hs]}
        for (a, b), hs in sorted(proofs.items())
    ]


def _cp_json(cp: TrustedCheckpoint | None) -> dict[str, Any] | None:
    return None if cp is None else {"size": cp.size, "root_hash": cp.root_hash.hex()}


def _cp_from(obj: Any) -> TrustedCheckpoint | None:
    if obj is None:
        return None
    return TrustedCheckpoint(int(obj["size"]), bytes.fromhex(str(obj["root_hash"])))


@dataclass
class RatchetState:
    """What a ratchet trusts, persisted between runs (see the module docstring)."""

    log: str = ""
    trusted: TrustedCheckpoint | None = None
    known: dict[int, bytes] = field(default_factory=dict)
    coverage: dict[str, frozenset[str]] = field(default_factory=dict)
    witnessed: TrustedCheckpoint | None = None
    heads: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """Canonical JSON bytes of the state."""
        obj = {
            "version": 1,
            "log": self.log,
            "trusted": _cp_json(self.trusted),
            "known": {str(k): v.hex() for k, v in sorted(self.known.items())},
            "coverage": {k: sorted(v) for k, v in sorted(self.coverage.items())},
            "witnessed": _cp_json(self.witnessed),
            "heads": dict(sorted(self.heads.items())),
        }
        return json.dumps(obj, sort_keys=True, indent=1).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, *, log: str | None = None) -> RatchetState:
        """Parse a state file's bytes.

        Raises:
            VerificationError: the bytes are not a state, or a state of another log.
        """
        try:
            obj = json.loads(data)
            state = cls(
                log=str(obj["log"]),
                trusted=_cp_from(obj["trusted"]),
                known={int(k): bytes.fromhex(v) for k, v in dict(obj["known"]).items()},
                coverage={str(k): frozenset(map(str, v)) for k, v in obj["coverage"].items()},
                witnessed=_cp_from(obj.get("witnessed")),
                heads={str(k): str(v) for k, v in dict(obj.get("heads", {})).items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise VerificationError(f"ratchet state: not a state file: {e!r:.120}") from e
        if obj.get("version") != 1:
            raise VerificationError(f"ratchet state: expected version 1, got {obj.get('version')}")
        if log is not None and state.log and state.log != log:
            raise VerificationError(
                f"ratchet state: it is the state of log {state.log!r}, not of {log!r}"
            )
        return state

    @classmethod
    def load(cls, path: Path, *, log: str | None = None) -> RatchetState | None:
        """Read a state file; None when it does not exist yet.

        Raises:
            VerificationError: the file is unreadable, malformed, or of another log.
        """
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise VerificationError(f"ratchet state {path}: {e.strerror}") from e
        return cls.from_json(data, log=log)

    def save(self, path: Path) -> None:
        """Write the state atomically and durably (``certd.atomicfile.write_atomic``).

        Raises:
            VerificationError: the file cannot be written.
        """
        try:
            write_atomic(path, self.to_json(), parents=True)
        except OSError as e:
            raise VerificationError(f"cannot write the ratchet state {path}: {e.strerror}") from e
