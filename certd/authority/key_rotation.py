"""Rotating the log key through the log: record the statement, and check it at start-up.

Example (what ``certd rotate-key`` does, with the replicas stopped)::

    with open_ledger(cfg, old_key) as ledger:
        index = record_rotation(ledger, old_key, new_key, now=int(time.time()))

The ``key-rotation/v1`` statement (``certd.keyrotation``) is signed by the outgoing and the
incoming key and appended under ``rotation_key(new key id)``; the ledger opened with the old
key signs the checkpoint that covers it. From then on certd signs with the new key, and a
replica starting with a key the latest checkpoint was not signed by must find the rotation
onto that key in the log, signed by the key that was in force (``check_start_key``): listing
the real key in ``access.previous_log_keys`` does not let a replica move the cluster onto
its own key.
"""

from __future__ import annotations

from collections.abc import Sequence

from certd.errors import ConfigError, ConsistencyError, InvalidInputError, SigningError
from certd.keyrotation import Rotation, open_rotation, rotation_envelope, rotation_key
from certd.ledger.log import Ledger
from certd.signing.dsse import KeyRing
from certd.signing.keys import SigningKey, VerifierKey
from certd.tlog import open_checkpoint

__all__ = ["check_start_key", "record_rotation"]


def record_rotation(ledger: Ledger, old: SigningKey, new: SigningKey, *, now: int) -> int:
    """Append the rotation from ``old`` (the ledger's key) to ``new``; return its index.

    Raises:
        InvalidInputError: the log already rotated onto ``new``, or the keys' names differ
            (the checkpoint origin is the key name).
    """
    if old.name != new.name:
        raise InvalidInputError(
            f"new key: expected the name {old.name!r} (the log's origin), got {new.name!r}",
            field="new_key",
        )
    key = rotation_key(new.key_id_hex)
    if ledger.find(key) is not None:
        raise InvalidInputError(
            f"the log already rotated onto key {new.key_id_hex}", field="new_key"
        )
    (index,) = ledger.append([(key, rotation_envelope(old, new, issued_at=now))])
    return index


def check_start_key(
    ledger: Ledger, signer: SigningKey, previous_keys: Sequence[VerifierKey]
) -> Rotation | None:
    """Refuse to start signing with a key the log never rotated onto.

    When the latest checkpoint is signed by ``signer``, or there is none, nothing to check.
    Otherwise the log must hold the rotation onto ``signer``, signed by a previous key.

    Raises:
        ConfigError: no such rotation, or it does not verify.
        ConsistencyError: the rotated-out key signed a checkpoint past its rotation.

    Returns:
        The rotation found, or None.
    """
    cp = ledger.checkpoint()
    if cp.checkpoint.size == 0:
        return None
    try:
        open_checkpoint(cp.note, [signer.verifier()])
        return None
    except SigningError:
        pass
    index = ledger.find(rotation_key(signer.key_id_hex))
    if index is None:
        raise ConfigError(
            f"the latest checkpoint is signed by a previous log key, and the log holds no "
            f"key-rotation statement onto this key ({signer.key_id_hex}): rotate with "
            f"`certd rotate-key` (docs/operating-a-cluster.md)"
        )
    try:
        rot = open_rotation(ledger.entry(index), KeyRing(previous_keys), index)
    except SigningError as e:
        raise ConfigError(f"the key rotation at entry {index} does not verify: {e}") from e
    if rot.new.key_id_hex != signer.key_id_hex or rot.new.public_key != signer.public_key:
        raise ConfigError(f"the key rotation at entry {index} names another key")
    if cp.checkpoint.size > index + 1:  # the old key signed past its rotation: a forgery
        raise ConsistencyError(
            f"the latest checkpoint (size {cp.checkpoint.size}) is signed by key "
            f"{rot.old.key_id_hex}, rotated out at entry {index} (RotatedKeyError): it may "
            f"sign checkpoints up to size {index + 1} only"
        )
    return rot
