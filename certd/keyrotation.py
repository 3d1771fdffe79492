"""Key rotation as a signed log statement, and the key ring that follows the log.

Example:
    >>> from certd.signing import KeyRing, SigningKey
    >>> old = SigningKey.generate("certd.example/log")
    >>> new = SigningKey.generate("certd.example/log")
    >>> entry = rotation_envelope(old, new, issued_at=1)
    >>> rot = open_rotation(entry, KeyRing([old.verifier()]), index=7)
    >>> rot.new.key_id_hex == new.key_id_hex
    True
    >>> ring = follow(KeyRing([old.verifier()]), [rot])
    >>> [(t.key.key_id_hex == old.key_id_hex, t.first_index, t.last_index) for t in ring]
    [(True, None, 7), (False, 8, None)]

A ``key-rotation/v1`` statement at ledger index R, signed by the outgoing key (the key in
force at R) and by the incoming key (proof that its holder consented), moves the log onto
the incoming key: the outgoing key may sign entries up to R (the rotation entry itself
included) and checkpoints up to size R + 1; the incoming key signs entries from R + 1 and
checkpoints from size R + 2. ``certd audit`` and the client verifier refuse anything else
(``RotatedKeyError``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from certd import tlog
from certd.errors import CertdError, MalformedStatementError, RotatedKeyError, SigningError
from certd.opening import PREDICATE_KEY_ROTATION, open_log_checkpoint, open_statement
from certd.signing.dsse import Envelope, KeyRing, TrustedKey, sign_envelope, verify_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, make_statement, sha256_hex
from certd.signing.keys import SigningKey, VerifierKey

__all__ = [
    "ROTATION_KEY_PREFIX",
    "Rotation",
    "follow",
    "open_rotation",
    "open_rotation_record",
    "outside_windows",
    "rotation_envelope",
    "rotation_key",
    "rotation_record",
]

ROTATION_KEY_PREFIX = "key-rotation/"
"""The ledger keys of key-rotation entries start with this (``rotation_key``)."""


def rotation_key(new_key_id_hex: str) -> str:
    """The ledger key of the rotation onto a key: at most one per incoming key."""
    return ROTATION_KEY_PREFIX + new_key_id_hex


@dataclass(frozen=True, slots=True)
class Rotation:
    """A verified key rotation: at ledger ``index`` the log moves from ``old`` to ``new``."""

    index: int
    old: VerifierKey
    new: VerifierKey
    issued_at: int


def rotation_envelope(old: SigningKey, new: SigningKey, *, issued_at: int) -> bytes:
    """The ``key-rotation/v1`` statement from ``old`` to ``new``, signed by both (DSSE JSON)."""
    if old.key_id_hex == new.key_id_hex:
        raise SigningError("expected a new key that differs from the old one")
    new_vkey = new.verifier().to_vkey()
    body = make_statement(
        [("log-key", sha256_hex(new_vkey.encode()))],
        PREDICATE_KEY_ROTATION,
        {"issued_at": issued_at, "new_key": new_vkey, "old_key": old.verifier().to_vkey()},
    )
    return sign_envelope(body, IN_TOTO_PAYLOAD_TYPE, [old, new]).to_json()


def open_rotation(entry: bytes, keys: KeyRing, index: int) -> Rotation:
    """Open the rotation statement at ledger ``index``.

    It must be signed by its ``old_key``, a key ``keys`` trusts at ``index``, and by its
    ``new_key``.

    Raises:
        SigningError: the statement does not open, the old key is not trusted at ``index``
            (``RotatedKeyError`` when it was rotated out before), or a signature is missing.
    """
    st = open_statement(entry, keys, PREDICATE_KEY_ROTATION, at_index=index)
    try:
        old = VerifierKey.from_vkey(st.predicate["old_key"])
        new = VerifierKey.from_vkey(st.predicate["new_key"])
    except (SigningError, ValueError) as e:
        raise MalformedStatementError(f"key rotation at entry {index}: bad vkey: {e}") from e
    if not keys.lookup(old.key_id_hex, at_index=index):
        raise RotatedKeyError(
            f"key rotation at entry {index}: its old key {old.key_id_hex} is not the log's "
            f"key at that index"
        )
    env = Envelope.from_json(entry)
    for key in (old, new):  # both holders signed; the old key alone is not enough
        verify_envelope(env, {key.key_id_hex: key})
    return Rotation(index, old, new, int(st.predicate["issued_at"]))


def follow(keys: KeyRing, rotations: Iterable[Rotation]) -> KeyRing:
    """``keys`` with the index windows the rotations give (taken in index order).

    The outgoing key's window ends at the rotation's index; the incoming key is trusted from
    the next index on (trust follows the log from a trusted key). Time windows are kept.
    """
    trusted = list(keys)
    for rot in sorted(rotations, key=lambda r: r.index):
        updated: list[TrustedKey] = []
        for t in trusted:
            if t.key.key_id_hex == rot.new.key_id_hex:
                continue  # the incoming key's window is the rotation's
            if t.key.key_id_hex == rot.old.key_id_hex and t.valid_at_index(rot.index):
                t = TrustedKey(t.key, t.not_before, t.not_after, t.first_index, rot.index)
            updated.append(t)
        updated.append(TrustedKey(rot.new, first_index=rot.index + 1))
        trusted = updated
    return KeyRing(trusted)


def outside_windows(ring: KeyRing, keyids: Iterable[str], start: int, end: int) -> list[int]:
    """The first index of each stretch of [start, end) no key of ``keyids`` may sign.

    ``keyids`` are the keys whose signatures verified on every entry of the stretch (the
    audit's runs of one signer); keys without index windows may sign anywhere.
    """
    wanted = set(keyids)
    windows = [
        (t.first_index or 0, end if t.last_index is None else t.last_index + 1)
        for t in ring
        if t.key.key_id_hex in wanted
    ]
    bad: list[int] = []
    at = start
    for lo, hi in sorted(windows):
        if lo > at and at < end:
            bad.append(at)
        at = max(at, hi)
    if at < end and windows:
        bad.append(at)
    return bad


def rotation_record(
    index: int, entry: bytes, checkpoint_note: str, tree_size: int, hashes: Iterable[bytes]
) -> dict[str, Any]:
    """The rotation entry with its inclusion proof, as ``certd rotate-key`` writes it for
    clients (``forkgate … --trust key-rotation-R.json``): the index is proven, not claimed."""
    return {
        "keyRotation": {
            "ledgerIndex": index,
            "entry": base64.b64encode(entry).decode("ascii"),
            "treeSize": tree_size,
            "hashes": [base64.b64encode(h).decode("ascii") for h in hashes],
            "checkpoint": checkpoint_note,
        }
    }


def open_rotation_record(obj: Any, keys: KeyRing) -> Rotation:
    """Verify a ``rotation_record``: the entry is at its index under a checkpoint a key of
    ``keys`` signed (in force at that size), and opens as a rotation there.

    Raises:
        SigningError: malformed, not included, or the rotation does not open.
    """
    try:
        rec = obj["keyRotation"]
        index, size = rec["ledgerIndex"], rec["treeSize"]
        entry = base64.b64decode(rec["entry"], validate=True)
        hashes = [base64.b64decode(h, validate=True) for h in rec["hashes"]]
        note = rec["checkpoint"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (index, size)):
            raise TypeError("ledgerIndex and treeSize must be integers")
    except (KeyError, TypeError, ValueError, binascii.Error) as e:
        raise MalformedStatementError(f"expected a key-rotation record: {e}") from e
    cp = open_log_checkpoint(note, keys)
    if cp.size != size:
        raise MalformedStatementError(f"checkpoint size {cp.size}, record says {size}")
    try:
        tlog.verify_inclusion(tlog.leaf_hash(entry), index, size, hashes, cp.root_hash)
    except CertdError as e:
        raise MalformedStatementError(f"key rotation at entry {index}: not included: {e}") from e
    return open_rotation(entry, keys, index)
