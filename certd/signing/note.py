"""C2SP signed notes and tlog cosignatures.

Example:
    >>> from certd.signing.keys import SigningKey
    >>> from certd.signing.note import open_note, sign_note
    >>> key = SigningKey.generate("certd.example/log")
    >>> signed = sign_note("hello\\n", key)
    >>> open_note(signed, [key.verifier()]).signers
    ('certd.example/log',)

Format (c2sp.org/signed-note): the text, which ends in a newline, then a blank line,
then one line per signature: ``— <key name> base64(key id 4 || signature)``. The text
is separated from the signatures by the *last* blank line.

Cosignatures (c2sp.org/tlog-cosignature, Ed25519 type 0x04) are signature lines whose
signature field is ``key id 4 || u64be timestamp || Ed25519 signature 64``, the signature
being over ``"cosignature/v1\\ntime <timestamp>\\n" + note text``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from certd.errors import SigningError
from certd.signing.keys import (
    SIG_TYPE_COSIGNATURE_V1,
    SIG_TYPE_ED25519,
    SigningKey,
    VerifierKey,
    compute_key_id,
    validate_key_name,
)

__all__ = [
    "MAX_SIGNATURES",
    "NoteSignature",
    "SignedNote",
    "add_signature_lines",
    "cosign",
    "cosignature_message",
    "open_note",
    "sign_note",
    "signature_line",
]

MAX_SIGNATURES = 100
"""Default cap on signature lines in a note (the spec asks verifiers to accept ≥ 16)."""

_SIG_PREFIX = "\u2014 "
_MAX_TIMESTAMP = 2**63 - 1


@dataclass(frozen=True)
class NoteSignature:
    """A signature line that verified with a trusted key.

    Attributes:
        name: the key name.
        key_id_hex: the key id as 8 lowercase hex digits.
        sig_type: ``SIG_TYPE_ED25519`` or ``SIG_TYPE_COSIGNATURE_V1``.
        timestamp: the cosignature time (POSIX seconds) for type 0x04, else None.
    """

    name: str
    key_id_hex: str
    sig_type: int
    timestamp: int | None = None


@dataclass(frozen=True)
class SignedNote:
    """A note whose signatures were verified.

    Attributes:
        text: the note text, ending in a newline.
        signatures: the verified signatures, in the order they appear.
    """

    text: str
    signatures: tuple[NoteSignature, ...]

    @property
    def signers(self) -> tuple[str, ...]:
        """Names of the keys whose signatures verified, in order."""
        return tuple(s.name for s in self.signatures)


def _check_note_chars(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise SigningError(f"expected valid UTF-8 in {what}, got a lone surrogate") from e
    for i, ch in enumerate(text):
        if ch < " " and ch != "\n":
            raise SigningError(
                f"expected no control character but newline in {what}, got {ch!r} at offset {i}"
            )


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise SigningError("expected note text ending in a newline, got none")
    _check_note_chars(text, "note text")


def cosignature_message(text: str, timestamp: int) -> bytes:
    """Build the message a tlog-cosignature/v1 Ed25519 signature covers.

    Args:
        text: the cosigned note text (a checkpoint), ending in a newline.
        timestamp: the cosignature time, POSIX seconds in [0, 2^63 - 1].

    Raises:
        SigningError: the text or the timestamp is invalid.

    Returns:
        ``b"cosignature/v1\\ntime <timestamp>\\n" + text``.
    """
    _check_text(text)
    if not 0 <= timestamp <= _MAX_TIMESTAMP:
        raise SigningError(f"expected a timestamp in [0, 2^63-1], got {timestamp}")
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


def _line(name: str, blob: bytes) -> str:
    return f"{_SIG_PREFIX}{name} {base64.b64encode(blob).decode('ascii')}"


def signature_line(text: str, key: SigningKey) -> str:
    """Sign a note text and return the signature line (without its newline).

    Args:
        text: the note text, ending in a newline.
        key: the signing key (type 0x01 role).

    Raises:
        SigningError: the text is not a valid note text.

    Returns:
        ``— <name> base64(key id || signature)``.
    """
    _check_text(text)
    return _line(key.name, key.key_id + key.sign(text.encode("utf-8")))


def sign_note(text: str, keys: SigningKey | Sequence[SigningKey]) -> str:
    """Sign a note text with one or more keys.

    Args:
        text: the note text, ending in a newline, without control characters but newline.
        keys: one key or several; a key given twice signs once.

    Raises:
        SigningError: the text is invalid or no key is given.

    Returns:
        The signed note: text, blank line, one signature line per key.
    """
    key_list = [keys] if isinstance(keys, SigningKey) else list(keys)
    if not key_list:
        raise SigningError("expected at least one signing key, got none")
    _check_text(text)
    lines: list[str] = []
    seen: set[tuple[str, bytes]] = set()
    for key in key_list:
        if (key.name, key.key_id) in seen:
            continue
        seen.add((key.name, key.key_id))
        lines.append(signature_line(text, key))
    return text + "\n" + "".join(line + "\n" for line in lines)


def cosign(checkpoint_text: str, key: SigningKey, timestamp: int) -> str:
    """Cosign a checkpoint text as a witness (c2sp.org/tlog-cosignature, Ed25519).

    The caller must have checked the checkpoint's consistency first: a cosignature states
    that this is the largest consistent tree head the cosigner has seen.

    Args:
        checkpoint_text: the checkpoint note text, ending in a newline.
        key: the cosigner's key; its key id is computed with type byte 0x04.
        timestamp: the cosignature time, POSIX seconds.

    Raises:
        SigningError: the text or the timestamp is invalid.

    Returns:
        The signature line ``— <name> base64(key id || u64be time || signature)``
        without its newline.
    """
    message = cosignature_message(checkpoint_text, timestamp)
    key_id = compute_key_id(key.name, SIG_TYPE_COSIGNATURE_V1, key.public_key)
    return _line(key.name, key_id + timestamp.to_bytes(8, "big") + key.sign(message))


def _split(signed: str) -> tuple[str, list[str]]:
    _check_note_chars(signed, "signed note")
    split = signed.rfind("\n\n")
    if split < 0:
        raise SigningError("expected a blank line before the signatures, got none")
    text, block = signed[: split + 1], signed[split + 2 :]
    if not block or not block.endswith("\n"):
        raise SigningError("expected signature lines ending in a newline after the blank line")
    return text, block[:-1].split("\n")


def _parse_line(line: str) -> tuple[str, bytes, bytes]:
    if not line.startswith(_SIG_PREFIX):
        raise SigningError(f"expected a signature line starting with '— ', got {line[:40]!r}")
    name, sep, b64 = line[len(_SIG_PREFIX) :].partition(" ")
    if not sep or not b64:
        raise SigningError(f"expected '— <name> <base64>', got {line[:60]!r}")
    validate_key_name(name)
    try:
        blob = base64.b64decode(b64.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise SigningError(f"expected base64 in the signature of {name}, got {b64[:40]!r}") from e
    if len(blob) < 5:
        raise SigningError(f"expected key id and signature from {name}, got {len(blob)} bytes")
    return name, blob[:4], blob[4:]


def _verify_one(key: VerifierKey, text: str, sig: bytes) -> NoteSignature:
    if key.sig_type == SIG_TYPE_ED25519:
        key.verify(text.encode("utf-8"), sig)
        return NoteSignature(key.name, key.key_id_hex, SIG_TYPE_ED25519)
    if len(sig) != 8 + 64:
        raise SigningError(
            f"expected a 72-byte timestamped cosignature from {key.name}, got {len(sig)} bytes"
        )
    timestamp = int.from_bytes(sig[:8], "big")
    key.verify(cosignature_message(text, timestamp), sig[8:])
    return NoteSignature(key.name, key.key_id_hex, SIG_TYPE_COSIGNATURE_V1, timestamp)


def _index_keys(verifiers: Iterable[VerifierKey]) -> dict[tuple[str, bytes], VerifierKey]:
    known: dict[tuple[str, bytes], VerifierKey] = {}
    for key in verifiers:
        other = known.setdefault((key.name, key.key_id), key)
        if other != key:
            raise SigningError(
                f"expected distinct trusted keys, got two for {key.name}+{key.key_id_hex}"
            )
    return known


def open_note(
    signed: str, verifiers: Iterable[VerifierKey], *, max_signatures: int = MAX_SIGNATURES
) -> SignedNote:
    """Verify a signed note against trusted keys.

    Signatures by unknown keys (no trusted key with that name *and* key id) are ignored, as
    c2sp.org/signed-note requires. A signature by a known key that fails to verify rejects
    the whole note. A type 0x04 verifier checks a timestamped cosignature.

    Args:
        signed: the signed note.
        verifiers: the trusted keys.
        max_signatures: the most signature lines accepted.

    Raises:
        SigningError: the note is malformed, has too many signature lines, a known key's
            signature does not verify, or no trusted key signed it.

    Returns:
        The note text and its verified signatures.
    """
    known = _index_keys(verifiers)
    text, lines = _split(signed)
    if len(lines) > max_signatures:
        raise SigningError(f"expected at most {max_signatures} signature lines, got {len(lines)}")
    verified: list[NoteSignature] = []
    seen: set[tuple[str, bytes]] = set()
    unknown: list[str] = []
    for line in lines:
        name, key_id, sig = _parse_line(line)
        key = known.get((name, key_id))
        if key is None:
            unknown.append(f"{name}+{key_id.hex()}")
            continue
        if (name, key_id) in seen:
            continue
        seen.add((name, key_id))
        verified.append(_verify_one(key, text, sig))
    if not verified:
        trusted = sorted(f"{n}+{i.hex()}" for n, i in known)
        raise SigningError(
            f"expected a signature by a trusted key {trusted}, got signatures by {unknown}"
        )
    return SignedNote(text=text, signatures=tuple(verified))


def add_signature_lines(signed: str, lines: Sequence[str]) -> str:
    """Append signature lines (e.g. witness cosignatures) to a signed note.

    Args:
        signed: a signed note.
        lines: signature lines, with or without their trailing newline.

    Raises:
        SigningError: the note or a line is malformed.

    Returns:
        The note with the new lines appended; a line already present is not repeated.
    """
    text, existing = _split(signed)
    out = list(existing)
    for raw in lines:
        line = raw.removesuffix("\n")
        _check_note_chars(line, "signature line")
        if "\n" in line:
            raise SigningError("expected one signature line, got several")
        _parse_line(line)
        if line not in out:
            out.append(line)
    return text + "\n" + "".join(line + "\n" for line in out)
