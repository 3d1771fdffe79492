"""The one way to open a statement certd signs, and the predicate types it knows.

Example:
    >>> from certd.signing import KeyRing, SigningKey, make_statement, sign_envelope
    >>> from certd.statements import receipt_predicate
    >>> key = SigningKey.generate("certd.example/log")
    >>> root = bytes(32)
    >>> body = make_statement([("verdict-batch", root.hex())], PREDICATE_VERDICT_RECEIPT,
    ...     receipt_predicate(batch_root=root, batch_size=1, verifiers=["v"], issued_at=0))
    >>> env = sign_envelope(body, "application/vnd.in-toto+json", key).to_json()
    >>> open_statement(env, KeyRing([key.verifier()]), PREDICATE_VERDICT_RECEIPT).predicate_type
    'https://forkgate.dev/attestations/verdict-receipt/v1'
    >>> open_statement(env, KeyRing([key.verifier()]), PREDICATE_FEASIBILITY)
    Traceback (most recent call last):
    ...
    certd.errors.WrongPredicateError: predicate type: expected https://forkgate.dev/...

Every consumer goes through ``open_statement``: ``certd.statements.verify_certificate``,
``verify_receipt`` and ``verify_acceptance`` (which then compare the message's copies), the
``forkgate`` ratchets, ``forkgate check-cert``, ``certd audit`` (every ledger entry) and the
witness (checkpoints, through ``open_log_checkpoint``). Light: it needs only
``certd.signing`` and the checkpoint parser.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from certd.errors import (
    MalformedStatementError,
    RotatedKeyError,
    SigningError,
    UnknownKeyError,
    WrongPredicateError,
)
from certd.signing.dsse import Envelope, KeyRing, verify_envelope
from certd.signing.intoto import (
    IN_TOTO_PAYLOAD_TYPE,
    Statement,
    canonical_json,
    load_statement_json,
    parse_statement,
    sha256_hex,
    statement_from_object,
)
from certd.tlog import Checkpoint, open_checkpoint

__all__ = [
    "PREDICATE_ACCEPTANCE",
    "PREDICATE_ACCEPTANCE_REFUSAL",
    "PREDICATE_FEASIBILITY",
    "PREDICATE_KAPPA_MODEL",
    "PREDICATE_KEY_ROTATION",
    "PREDICATE_TYPES",
    "PREDICATE_VERDICT_RECEIPT",
    "open_envelope",
    "open_log_checkpoint",
    "open_statement",
]

PREDICATE_FEASIBILITY = "https://forkgate.dev/attestations/feasibility/v1"
PREDICATE_VERDICT_RECEIPT = "https://forkgate.dev/attestations/verdict-receipt/v1"
PREDICATE_ACCEPTANCE = "https://forkgate.dev/attestations/acceptance/v1"
PREDICATE_ACCEPTANCE_REFUSAL = "https://forkgate.dev/attestations/acceptance-refusal/v1"
PREDICATE_KAPPA_MODEL = "https://forkgate.dev/attestations/kappa-model/v1"
PREDICATE_KEY_ROTATION = "https://forkgate.dev/attestations/key-rotation/v1"

_STR, _INT, _OBJ = "a string", "an integer", "an object"
_SHAPES: dict[str, dict[str, str]] = {
    PREDICATE_FEASIBILITY: {
        "domain": _STR,
        "issued_at": _INT,
        "kappa": _STR,
        "label": _STR,
        "label_fields": _OBJ,
        "task": _OBJ,
        "task_digest": _STR,
        "verifier": _STR,
        "witness": _STR,
        "witness_digest": _STR,
    },
    PREDICATE_VERDICT_RECEIPT: {"batch_root": _STR, "batch_size": _INT, "issued_at": _INT},
    PREDICATE_ACCEPTANCE: {
        "capabilities": _OBJ,
        "checkpoint": _OBJ,
        "issued_at": _INT,
        "predecessor": _STR,
        "run": _STR,
        "seed": _INT,
        "sequence": _INT,
        "target": _STR,
    },
}
_SHAPES[PREDICATE_ACCEPTANCE_REFUSAL] = {**_SHAPES[PREDICATE_ACCEPTANCE], "refusal": _OBJ}
_SHAPES[PREDICATE_KAPPA_MODEL] = {
    "clusters": _STR,
    "clusters_digest": _STR,
    "embedding_model_sha256": _STR,
    "issued_at": _INT,
    "kappa": _STR,
    "method": _STR,
    "steps": _STR,
    "task": _OBJ,
    "task_digest": _STR,
}
# The log's signing key changes at this entry: signed by the outgoing key (and the incoming
# one); the vkeys are C2SP verifier keys. ``certd.keyrotation`` reads it.
_SHAPES[PREDICATE_KEY_ROTATION] = {"issued_at": _INT, "new_key": _STR, "old_key": _STR}

PREDICATE_TYPES = frozenset(_SHAPES)
"""Every predicate type certd signs (what the ledger holds)."""


def _claimed_time(payload: bytes) -> int:
    """The predicate's ``issued_at``, read before verification to pick keys by validity window.

    The signature is then checked with the keys valid at that time, so a rotated-out key
    verifies only what it signed inside its window.
    """
    try:
        obj = json.loads(payload)
    except ValueError as e:
        raise MalformedStatementError("expected a statement with predicate.issued_at") from e
    return _issued_at(obj)


def _issued_at(obj: Any) -> int:
    try:
        at = obj["predicate"]["issued_at"]
    except (KeyError, TypeError) as e:
        raise MalformedStatementError("expected a statement with predicate.issued_at") from e
    if not isinstance(at, int) or isinstance(at, bool):
        raise MalformedStatementError(f"expected issued_at to be an integer, got {at!r:.40}")
    return at


_TYPES = {_STR: str, _INT: int, _OBJ: dict}
_FIELDS = {
    kind: tuple((name, what, _TYPES[what]) for name, what in fields.items())
    for kind, fields in _SHAPES.items()
}


def _check_feasible(value: Any) -> None:
    """The optional signed enumeration of a feasibility predicate: counts >= 1, a flag."""
    ok = isinstance(value, dict) and set(value) == {"complete", "families", "labels"}
    if ok:
        counts = [value["families"], value["labels"]]
        ok = all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in counts)
        ok = ok and isinstance(value["complete"], bool)
    if not ok:
        raise MalformedStatementError(
            f"expected predicate.feasible to be {{labels, families, complete}}, got {value!r:.60}"
        )


def _check_shape(st: Statement) -> None:
    """Every field the predicate type needs, of its type, and subjects that agree with it."""
    p = st.predicate
    for name, kind, want_type in _FIELDS[st.predicate_type]:
        value = p.get(name)
        if value.__class__ is not want_type and (
            not isinstance(value, want_type) or (kind == _INT and isinstance(value, bool))
        ):
            raise MalformedStatementError(
                f"expected predicate.{name} to be {kind}, got {p.get(name)!r:.60}"
            )
    subjects = dict(st.subjects)
    if st.predicate_type == PREDICATE_FEASIBILITY and "feasible" in p:
        _check_feasible(p["feasible"])
    if st.predicate_type == PREDICATE_FEASIBILITY:
        want = {"task": p["task_digest"], "witness": p["witness_digest"]}
        if sha256_hex(canonical_json(p["task"])) != p["task_digest"]:
            raise MalformedStatementError("predicate.task does not hash to predicate.task_digest")
        if sha256_hex(p["witness"].encode()) != p["witness_digest"]:
            raise MalformedStatementError("predicate.witness does not hash to its digest")
    elif st.predicate_type == PREDICATE_VERDICT_RECEIPT:
        want = {"verdict-batch": p["batch_root"]}
    elif st.predicate_type == PREDICATE_KEY_ROTATION:
        want = {"log-key": sha256_hex(p["new_key"].encode())}
    elif st.predicate_type == PREDICATE_KAPPA_MODEL:
        want = {"task": p["task_digest"], "clusters": p["clusters_digest"]}
        if sha256_hex(canonical_json(p["task"])) != p["task_digest"]:
            raise MalformedStatementError("predicate.task does not hash to predicate.task_digest")
        if sha256_hex(p["clusters"].encode()) != p["clusters_digest"]:
            raise MalformedStatementError("predicate.clusters does not hash to its digest")
    else:
        want = {"checkpoint": p["checkpoint"].get("digest")}
    for name, digest in want.items():
        if subjects.get(name) != digest:
            raise MalformedStatementError(
                f"subject {name}: expected {digest!r:.70}, got {subjects.get(name)!r:.70}"
            )


def open_statement(
    envelope: bytes,
    keys: KeyRing,
    predicate_types: str | Collection[str],
    *,
    at_index: int | None = None,
) -> Statement:
    """Open a statement certd signed: the one function every consumer goes through.

    Checked in this order (each failure its own error):

    1. the bytes are a DSSE envelope with payloadType ``application/vnd.in-toto+json``
       (``MalformedStatementError``);
    2. a signature's key id is a trusted key valid at the statement's ``issued_at``
       and, given ``at_index``, inside the ledger indexes the log's key rotations leave it
       (``UnknownKeyError``; ``RotatedKeyError`` when only the index window refuses it)
       and its signature over the PAE verifies (``BadSignatureError``);
    3. the payload is an in-toto Statement v1 (``MalformedStatementError``) of one of
       ``predicate_types`` (``WrongPredicateError``);
    4. its predicate has every field of its type, and its subjects agree with it
       (``MalformedStatementError``).

    Args:
        envelope: the DSSE envelope JSON bytes.
        keys: trusted log keys (with validity windows).
        predicate_types: the predicate type(s) the caller accepts.
        at_index: the entry's ledger index (checked against ``TrustedKey`` index windows).

    Raises:
        SigningError: one of the subclasses above.

    Returns:
        The verified statement.
    """
    return open_envelope(Envelope.from_json(envelope), keys, predicate_types, at_index=at_index)


def open_envelope(
    env: Envelope,
    keys: KeyRing,
    predicate_types: str | Collection[str],
    *,
    at_index: int | None = None,
) -> Statement:
    """``open_statement`` on an envelope already parsed (``Envelope.from_json``), for a
    caller that also reads the envelope's signatures (the audit), so it is parsed once."""
    wanted = {predicate_types} if isinstance(predicate_types, str) else predicate_types
    if env.payload_type != IN_TOTO_PAYLOAD_TYPE:
        raise MalformedStatementError(
            f"payloadType: expected {IN_TOTO_PAYLOAD_TYPE!r}, got {env.payload_type!r:.60}"
        )
    sigs = env.signatures
    if not (
        keys.knows(sigs[0].keyid) if len(sigs) == 1 else any(keys.knows(s.keyid) for s in sigs)
    ):
        ids = ", ".join(sig.keyid for sig in env.signatures)
        raise UnknownKeyError(f"no trusted key has key id {ids}")
    # Parse the payload once, strictly (UTF-8, unique keys): the object the step-by-step
    # path would read, so the same outcome; anything odd takes the step-by-step path.
    try:
        obj: Any = load_statement_json(env.payload)
        strict = True
    except MalformedStatementError:
        obj, strict = None, False
    if strict:
        verify_envelope(env, keys, at_time=_issued_at(obj), at_index=at_index)
        st = statement_from_object(obj)
    else:
        at = _claimed_time(env.payload)
        payload = verify_envelope(env, keys, at_time=at, at_index=at_index)
        st = parse_statement(payload)
    if st.predicate_type not in wanted:
        raise WrongPredicateError(
            f"predicate type: expected {' or '.join(sorted(wanted))}, got {st.predicate_type}"
        )
    if st.predicate_type in _SHAPES:
        _check_shape(st)
    return st


def open_log_checkpoint(note: str, keys: KeyRing, origin: str | None = None) -> Checkpoint:
    """Open a checkpoint the log signed (a C2SP signed note, not a DSSE envelope).

    Checkpoints carry no time, so every trusted log key counts, whatever its time window.
    Index windows (key rotations) do count: a checkpoint of size n must be signed by a key
    that may sign entry n - 1 (the rotation entry's own checkpoint by the outgoing key).

    Raises:
        SigningError: no trusted key signed the note, or it is malformed.
        RotatedKeyError: only a key rotated out (or not yet in) at that size signed it.
        InvalidInputError: the note is not a checkpoint of ``origin``.
    """
    cp = open_checkpoint(note, [t.key for t in keys], origin=origin)
    if all(t.first_index is None and t.last_index is None for t in keys):
        return cp
    in_force = [t.key for t in keys if t.valid_at_index(cp.size - 1)]
    try:
        return open_checkpoint(note, in_force, origin=origin)
    except SigningError as e:
        raise RotatedKeyError(
            f"checkpoint of size {cp.size}: not signed by the log key in force at entry "
            f"{cp.size - 1} (rotated): {e}"
        ) from e
