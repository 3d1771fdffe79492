"""Key-rotation statements and the index windows they give (real Ed25519, no mocks).

One generator of attacks on the rotation itself (who signed it, what it names) and one of
entries and checkpoints signed by the wrong key on either side of the rotation index.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from certd.errors import MalformedStatementError, RotatedKeyError, SigningError, UnknownKeyError
from certd.keyrotation import (
    follow,
    open_rotation,
    open_rotation_record,
    outside_windows,
    rotation_envelope,
    rotation_record,
)
from certd.opening import (
    PREDICATE_KEY_ROTATION,
    PREDICATE_TYPES,
    open_log_checkpoint,
    open_statement,
)
from certd.signing.dsse import KeyRing, sign_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, make_statement, sha256_hex
from certd.signing.keys import SigningKey
from certd.statements import receipt_predicate
from certd.tlog import Checkpoint, leaf_hash, sign_checkpoint
from certd.tlog.merkle import reference_inclusion_proof, root_from_leaf_hashes

NAME = "certd.example/log"
OLD, NEW, ROGUE = (SigningKey.generate(NAME) for _ in range(3))
R = 5


def _receipt(key: SigningKey) -> bytes:
    root = bytes(32)
    body = make_statement(
        [("verdict-batch", root.hex())],
        "https://forkgate.dev/attestations/verdict-receipt/v1",
        receipt_predicate(batch_root=root, batch_size=1, verifiers=["v"], issued_at=0),
    )
    return sign_envelope(body, IN_TOTO_PAYLOAD_TYPE, key).to_json()


def _rotation_by(signers: list[SigningKey], old: SigningKey, new: SigningKey) -> bytes:
    vkey = new.verifier().to_vkey()
    body = make_statement(
        [("log-key", sha256_hex(vkey.encode()))],
        PREDICATE_KEY_ROTATION,
        {"issued_at": 1, "new_key": vkey, "old_key": old.verifier().to_vkey()},
    )
    return sign_envelope(body, IN_TOTO_PAYLOAD_TYPE, signers).to_json()


def _wrong_subject() -> bytes:
    vkey = NEW.verifier().to_vkey()
    body = make_statement(
        [("log-key", sha256_hex(ROGUE.verifier().to_vkey().encode()))],
        PREDICATE_KEY_ROTATION,
        {"issued_at": 1, "new_key": vkey, "old_key": OLD.verifier().to_vkey()},
    )
    return sign_envelope(body, IN_TOTO_PAYLOAD_TYPE, [OLD, NEW]).to_json()


RING = KeyRing([OLD.verifier()])
FOLLOWED = follow(RING, [open_rotation(rotation_envelope(OLD, NEW, issued_at=1), RING, R)])

BAD_ROTATIONS: dict[str, tuple[Callable[[], bytes], type[SigningError]]] = {
    "old key only (no consent of the new)": (
        lambda: _rotation_by([OLD], OLD, NEW),
        UnknownKeyError,
    ),
    "new key only": (lambda: _rotation_by([NEW], OLD, NEW), UnknownKeyError),
    "a rogue key names itself the old key": (
        lambda: _rotation_by([ROGUE, NEW], ROGUE, NEW),
        UnknownKeyError,
    ),
    "signed by the old key, names a rogue as old": (
        lambda: _rotation_by([OLD, NEW], ROGUE, NEW),
        RotatedKeyError,
    ),
    "subject of another key": (lambda: _wrong_subject(), MalformedStatementError),
}


@pytest.mark.parametrize("case", sorted(BAD_ROTATIONS))
def test_a_rotation_without_both_holders_is_refused(case: str) -> None:
    make, error = BAD_ROTATIONS[case]
    with pytest.raises(error):
        open_rotation(make(), RING, R)


def test_a_rotation_by_a_key_already_rotated_out_is_refused() -> None:
    again = rotation_envelope(OLD, ROGUE, issued_at=2)
    with pytest.raises(RotatedKeyError):
        open_rotation(again, FOLLOWED, R + 3)


# (signer, index, verifies) on either side of the rotation at R
ENTRIES = [
    (OLD, R - 1, True),
    (OLD, R, True),
    (OLD, R + 1, False),
    (NEW, R, False),
    (NEW, R - 3, False),
    (NEW, R + 1, True),
]


@pytest.mark.parametrize(("signer", "index", "ok"), ENTRIES, ids=lambda v: str(v)[:12])
def test_entries_verify_only_inside_their_keys_window(
    signer: SigningKey, index: int, ok: bool
) -> None:
    entry = _receipt(signer)
    if ok:
        open_statement(entry, FOLLOWED, PREDICATE_TYPES, at_index=index)
        assert not outside_windows(FOLLOWED, {signer.key_id_hex}, index, index + 1)
    else:
        with pytest.raises(RotatedKeyError, match="rotated"):
            open_statement(entry, FOLLOWED, PREDICATE_TYPES, at_index=index)
        assert outside_windows(FOLLOWED, {signer.key_id_hex}, index, index + 1) == [index]


@pytest.mark.parametrize(
    ("signer", "size", "ok"),
    [
        (OLD, R, True),
        (OLD, R + 1, True),
        (OLD, R + 2, False),
        (NEW, R + 1, False),
        (NEW, R + 2, True),
    ],
)
def test_checkpoints_across_the_rotation(signer: SigningKey, size: int, ok: bool) -> None:
    note = sign_checkpoint(Checkpoint(NAME, size, bytes(32)), signer)
    if ok:
        assert open_log_checkpoint(note, FOLLOWED).size == size
    else:
        with pytest.raises(RotatedKeyError):
            open_log_checkpoint(note, FOLLOWED)


def test_a_rotation_record_proves_its_index() -> None:
    entries = [_receipt(OLD) for _ in range(R)] + [rotation_envelope(OLD, NEW, issued_at=1)]
    leaves = [leaf_hash(e) for e in entries]
    note = sign_checkpoint(Checkpoint(NAME, R + 1, root_from_leaf_hashes(leaves)), OLD)
    record = rotation_record(R, entries[R], note, R + 1, reference_inclusion_proof(leaves, R))
    assert open_rotation_record(record, RING).index == R
    record["keyRotation"]["ledgerIndex"] = R - 1  # a claimed index the proof does not give
    with pytest.raises(MalformedStatementError, match="not included"):
        open_rotation_record(record, RING)
