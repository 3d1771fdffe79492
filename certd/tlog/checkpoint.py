"""C2SP tlog-checkpoint: the signed tree head of the ledger (pure).

Example:
    >>> from certd.signing.keys import SigningKey
    >>> from certd.tlog.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
    >>> from certd.tlog.merkle import EMPTY_ROOT
    >>> key = SigningKey.generate("certd.example/log")
    >>> signed = sign_checkpoint(Checkpoint("certd.example/log", 0, EMPTY_ROOT), key)
    >>> open_checkpoint(signed, [key.verifier()], origin="certd.example/log").size
    0

The note text (c2sp.org/tlog-checkpoint) is at least three non-empty lines, each ending in
a newline: the origin, the tree size in decimal without leading zeros, the root hash in
standard base64, then optional extension lines.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from dataclasses import dataclass

from certd.errors import LedgerError, SigningError
from certd.signing.keys import SIG_TYPE_ED25519, SigningKey, VerifierKey
from certd.signing.note import SignedNote, open_note, sign_note
from certd.tlog.merkle import HASH_SIZE

__all__ = [
    "Checkpoint",
    "MAX_TREE_SIZE",
    "SignedCheckpoint",
    "open_checkpoint",
    "open_checkpoint_note",
    "sign_checkpoint",
]

MAX_TREE_SIZE = 2**63 - 1
"""Largest tree size accepted in a checkpoint."""

_SIZE_RE = re.compile(r"0|[1-9][0-9]{0,18}")


def _check_line(line: str, what: str) -> None:
    if not line:
        raise LedgerError(f"expected a non-empty {what}, got an empty line")
    for ch in line:
        if ch < " ":
            raise LedgerError(f"expected no control character in the {what}, got {ch!r}")


@dataclass(frozen=True)
class Checkpoint:
    """A tree head: origin, size and root hash, validated on construction.

    Attributes:
        origin: the log's identity, e.g. ``certd.example/log``.
        size: the number of leaves.
        root_hash: the 32-byte RFC 6962 root of the first ``size`` leaves.
        extensions: optional non-empty extension lines (not recommended by the spec).
    """

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_line(self.origin, "origin")
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise LedgerError(f"expected an integer tree size, got {type(self.size).__name__}")
        if not 0 <= self.size <= MAX_TREE_SIZE:
            raise LedgerError(f"expected a tree size in [0, 2^63-1], got {self.size}")
        if len(self.root_hash) != HASH_SIZE:
            raise LedgerError(
                f"expected a {HASH_SIZE}-byte root hash, got {len(self.root_hash)} bytes"
            )
        for line in self.extensions:
            _check_line(line, "extension line")

    def to_text(self) -> str:
        """Format as checkpoint note text.

        Returns:
            ``origin\\nsize\\nbase64(root)\\n`` followed by extension lines.
        """
        lines = [self.origin, str(self.size), base64.b64encode(self.root_hash).decode("ascii")]
        return "".join(line + "\n" for line in [*lines, *self.extensions])

    @classmethod
    def from_text(cls, text: str) -> Checkpoint:
        """Parse checkpoint note text.

        Args:
            text: the note text (without signatures).

        Raises:
            LedgerError: the text is not a well-formed checkpoint.

        Returns:
            The checkpoint.
        """
        if not text.endswith("\n"):
            raise LedgerError("expected checkpoint text ending in a newline, got none")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise LedgerError(f"expected at least 3 checkpoint lines, got {len(lines)}")
        origin, size_text, root_text, *extensions = lines
        if not _SIZE_RE.fullmatch(size_text):
            raise LedgerError(
                f"expected a decimal tree size without leading zeros, got {size_text[:40]!r}"
            )
        try:
            root = base64.b64decode(root_text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as e:
            raise LedgerError(f"expected a base64 root hash, got {root_text[:60]!r}") from e
        if base64.b64encode(root).decode("ascii") != root_text:
            raise LedgerError(f"expected canonical base64 for the root, got {root_text!r}")
        return cls(origin, int(size_text), root, tuple(extensions))


@dataclass(frozen=True)
class SignedCheckpoint:
    """A checkpoint with the signed note it was read from.

    Attributes:
        note: the signed note text (checkpoint text, blank line, signature lines).
        checkpoint: the parsed checkpoint.
    """

    note: str
    checkpoint: Checkpoint


def sign_checkpoint(checkpoint: Checkpoint, key: SigningKey) -> str:
    """Sign a checkpoint as a note.

    The spec recommends that the key name equal the origin; this is not enforced.

    Args:
        checkpoint: the checkpoint.
        key: the log's signing key.

    Returns:
        The signed note text.
    """
    return sign_note(checkpoint.to_text(), key)


def open_checkpoint_note(
    signed: str, verifiers: Iterable[VerifierKey], origin: str | None = None
) -> tuple[Checkpoint, SignedNote]:
    """Verify a signed checkpoint and return it with its verified signatures.

    A log signature (type 0x01) by a trusted key is required; cosignatures by trusted
    cosigner keys (type 0x04) are verified and reported but do not suffice alone.

    Args:
        signed: the signed checkpoint note.
        verifiers: trusted log keys, and optionally cosigner keys.
        origin: the expected origin, or None to accept any.

    Raises:
        SigningError: no trusted log key signed it, or a trusted key's signature fails.
        LedgerError: the text is not a checkpoint, or its origin differs.

    Returns:
        (the checkpoint, the verified note).
    """
    note = open_note(signed, verifiers)
    if not any(s.sig_type == SIG_TYPE_ED25519 for s in note.signatures):
        raise SigningError(
            f"expected a log signature by a trusted key, got only cosignatures by "
            f"{list(note.signers)}"
        )
    checkpoint = Checkpoint.from_text(note.text)
    if origin is not None and checkpoint.origin != origin:
        raise LedgerError(f"expected origin {origin!r}, got {checkpoint.origin!r}")
    return checkpoint, note


def open_checkpoint(
    signed: str, verifiers: Iterable[VerifierKey], origin: str | None = None
) -> Checkpoint:
    """Verify a signed checkpoint.

    Args:
        signed: the signed checkpoint note.
        verifiers: trusted log keys (type 0x01).
        origin: the expected origin, or None to accept any.

    Raises:
        SigningError: no trusted log key signed it, or a trusted key's signature fails.
        LedgerError: the text is not a checkpoint, or its origin differs.

    Returns:
        The checkpoint.
    """
    return open_checkpoint_note(signed, verifiers, origin)[0]
