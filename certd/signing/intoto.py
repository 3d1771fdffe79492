"""in-toto Statement v1 in canonical JSON, and its DSSE envelope.

Example:
    >>> from certd.signing.intoto import make_statement, parse_statement, sha256_hex
    >>> body = make_statement([("task", sha256_hex(b"t"))], "https://x.example/p/v1", {"k": 1})
    >>> parse_statement(body).predicate
    {'k': 1}

Canonical JSON here: keys sorted, separators ``,`` and ``:``, UTF-8 without ASCII
escaping, no NaN or infinities. Floats use Python's shortest round-trip repr; callers that
need byte-identical output across languages should avoid floats in predicates.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from certd.errors import InvalidInputError, MalformedStatementError
from certd.signing.dsse import Envelope, KeyRing, unique_keys, verify_envelope
from certd.signing.keys import VerifierKey

__all__ = [
    "IN_TOTO_PAYLOAD_TYPE",
    "STATEMENT_TYPE",
    "Statement",
    "canonical_json",
    "load_statement_json",
    "make_statement",
    "parse_statement",
    "sha256_hex",
    "statement_from_object",
    "verify_statement_envelope",
]

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
"""DSSE payloadType of an in-toto statement."""

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
"""The ``_type`` of an in-toto Statement v1."""

_STATEMENT_FIELDS = frozenset({"_type", "subject", "predicateType", "predicate"})
_SHA256_HEX = re.compile("[0-9a-f]{64}")
# What ``json.dumps(obj, **these)`` builds per call, built once (it keeps no state between calls).
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
# The C encoder ``_CANONICAL.encode`` builds on every call, built once (the audit hashes a
# million tasks): the same arguments but no circular-reference markers, so a cycle raises
# RecursionError, mapped below like the encoder's own ValueError. None without the C module.
_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)  # untyped in typeshed
_C_CANONICAL: Any = (
    None
    if _MAKE_ENCODER is None
    else _MAKE_ENCODER(
        None, _CANONICAL.default, json.encoder.encode_basestring, None, ":", ",", True, False, False
    )
)


def canonical_json(obj: object) -> bytes:
    """Serialize a JSON value canonically.

    Args:
        obj: dicts with string keys, lists, strings, ints, finite floats, bools, None.

    Raises:
        InvalidInputError: the value is not JSON-serializable (or holds NaN/infinity).

    Returns:
        UTF-8 bytes, keys sorted, no whitespace, non-ASCII kept as UTF-8.
    """
    try:
        if _C_CANONICAL is not None:
            text = "".join(_C_CANONICAL(obj, 0))
        else:
            text = _CANONICAL.encode(obj)
    except RecursionError as e:
        raise InvalidInputError(
            "expected a JSON-serializable value: nested too deeply or circular"
        ) from e
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"expected a JSON-serializable value: {e}") from e
    return text.encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Hash bytes with SHA-256.

    Args:
        data: the bytes.

    Returns:
        The digest as 64 lowercase hex digits.
    """
    return hashlib.sha256(data).hexdigest()


def _check_digest(name: str, digest: object) -> str:
    if not isinstance(digest, str) or _SHA256_HEX.fullmatch(digest) is None:
        raise MalformedStatementError(
            f"expected subject {name!r} sha256 as 64 lowercase hex digits, got {digest!r:.80}"
        )
    return digest


@dataclass(frozen=True)
class Statement:
    """An in-toto Statement v1, validated on construction.

    Attributes:
        subjects: (name, sha256 hex) pairs, at least one.
        predicate_type: the predicate type URI.
        predicate: the predicate object.
    """

    subjects: tuple[tuple[str, str], ...]
    predicate_type: str
    predicate: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not self.subjects:
            raise MalformedStatementError("expected at least one subject, got none")
        for subject in self.subjects:
            if len(subject) != 2 or not isinstance(subject[0], str):
                raise MalformedStatementError(
                    f"expected subject (name, sha256 hex), got {subject!r:.80}"
                )
            _check_digest(subject[0], subject[1])
        if not isinstance(self.predicate_type, str) or not self.predicate_type:
            raise MalformedStatementError(
                f"expected a non-empty predicateType, got {self.predicate_type!r}"
            )
        if self.predicate.__class__ is not dict and not isinstance(self.predicate, Mapping):
            raise MalformedStatementError(
                f"expected the predicate to be an object, got {type(self.predicate).__name__}"
            )

    def to_json(self) -> bytes:
        """Serialize as canonical JSON.

        Raises:
            SigningError: the predicate is not JSON-serializable.

        Returns:
            The statement bytes.
        """
        obj = {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": n, "digest": {"sha256": d}} for n, d in self.subjects],
            "predicateType": self.predicate_type,
            "predicate": self.predicate,
        }
        try:
            return canonical_json(obj)
        except InvalidInputError as e:
            raise MalformedStatementError(f"cannot serialize the predicate: {e}") from e


def make_statement(
    subjects: Sequence[tuple[str, str]], predicate_type: str, predicate: Mapping[str, Any]
) -> bytes:
    """Build a Statement v1 as canonical JSON.

    Args:
        subjects: (name, sha256 hex) pairs.
        predicate_type: the predicate type URI.
        predicate: the predicate object.

    Raises:
        SigningError: a field is invalid or the predicate is not JSON-serializable.

    Returns:
        The canonical JSON bytes.
    """
    pairs: list[tuple[str, str]] = []
    for s in subjects:
        if len(s) != 2:
            raise MalformedStatementError(f"expected subject (name, sha256 hex), got {s!r:.80}")
        pairs.append((s[0], s[1]))
    return Statement(tuple(pairs), predicate_type, predicate).to_json()


_STRICT_JSON = json.JSONDecoder(object_pairs_hook=unique_keys(MalformedStatementError))


def parse_statement(data: bytes) -> Statement:
    """Parse and validate a Statement v1.

    Each subject must carry a ``sha256`` digest (other digest algorithms are ignored).

    Args:
        data: the statement JSON bytes.

    Raises:
        SigningError: the bytes are not a valid Statement v1.

    Returns:
        The statement.
    """
    return statement_from_object(load_statement_json(data))


def load_statement_json(data: bytes) -> Any:
    """Parse statement bytes as strict JSON (UTF-8, unique keys), not yet validated.

    ``parse_statement(data)`` is ``statement_from_object(load_statement_json(data))``; the
    two halves let a caller that needs a field before validating parse the bytes once.

    Raises:
        MalformedStatementError: the bytes are not UTF-8 JSON with unique keys.
    """
    # Fast path: orjson (stricter: UTF-8, no lone surrogates, 64-bit integers), trusted only
    # when the bytes are exactly its canonical re-encoding, which rules out a repeated key
    # (it would be written once) and anything it reads differently from the strict parser.
    try:
        obj = orjson.loads(data)
        if orjson.dumps(obj, option=orjson.OPT_SORT_KEYS) == data:
            return obj
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        pass
    try:
        return _STRICT_JSON.decode(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise MalformedStatementError("expected a JSON statement, got malformed JSON") from e


def statement_from_object(obj: Any) -> Statement:
    """Validate a parsed statement (``load_statement_json``'s result) as a Statement v1.

    Raises:
        SigningError: the object is not a valid Statement v1.
    """
    if not isinstance(obj, dict):
        raise MalformedStatementError(f"expected a JSON object, got {type(obj).__name__}")
    if obj.keys() != _STATEMENT_FIELDS:
        raise MalformedStatementError(
            f"expected fields {sorted(_STATEMENT_FIELDS)}, got {sorted(obj)}"
        )
    if obj["_type"] != STATEMENT_TYPE:
        raise MalformedStatementError(
            f"expected _type {STATEMENT_TYPE!r}, got {obj['_type']!r:.80}"
        )
    raw_subjects = obj["subject"]
    if not isinstance(raw_subjects, list):
        raise MalformedStatementError("expected subject to be a list")
    subjects: list[tuple[str, str]] = []
    for i, s in enumerate(raw_subjects):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str):
            raise MalformedStatementError(
                f"expected subject {i} to be an object with a string name"
            )
        digest = s.get("digest")
        if not isinstance(digest, dict) or "sha256" not in digest:
            raise MalformedStatementError(f"expected subject {i} to carry a sha256 digest")
        subjects.append((s["name"], digest["sha256"]))
    return Statement(tuple(subjects), obj["predicateType"], obj["predicate"])  # checks digests


def verify_statement_envelope(
    envelope: Envelope,
    trusted: Mapping[str, VerifierKey] | KeyRing,
    *,
    at_time: int | None = None,
) -> Statement:
    """Verify a DSSE envelope and parse its in-toto statement.

    Args:
        envelope: the envelope.
        trusted: trusted keys by key id hex, or a KeyRing.
        at_time: POSIX seconds the key must be valid at, or None.

    Raises:
        SigningError: the payload type is not in-toto, no trusted signature verifies, or
            the payload is not a valid statement.

    Returns:
        The verified statement.
    """
    if envelope.payload_type != IN_TOTO_PAYLOAD_TYPE:
        raise MalformedStatementError(
            f"expected payloadType {IN_TOTO_PAYLOAD_TYPE!r}, got {envelope.payload_type!r}"
        )
    return parse_statement(verify_envelope(envelope, trusted, at_time=at_time))
