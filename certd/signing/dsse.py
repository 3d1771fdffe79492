"""DSSE envelopes signed with Ed25519 and a key ring of trusted keys.

Example:
    >>> from certd.signing.keys import SigningKey
    >>> from certd.signing.dsse import Envelope, KeyRing, sign_envelope, verify_envelope
    >>> key = SigningKey.generate("certd.example/log")
    >>> env = sign_envelope(b'{"a":1}', "application/vnd.in-toto+json", key)
    >>> verify_envelope(Envelope.from_json(env.to_json()), KeyRing([key.verifier()]))
    b'{"a":1}'

The signature covers the pre-authentication encoding (secure-systems-lab/dsse,
protocol.md)::

    PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body

with LEN the ASCII decimal byte length. A signature's ``keyid`` is the signer's C2SP key
id (type 0x01) as 8 lowercase hex digits.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pybase64

from certd.errors import (
    BadSignatureError,
    MalformedStatementError,
    RotatedKeyError,
    SigningError,
    UnknownKeyError,
)
from certd.signing.keyring import KeyRing, TrustedKey
from certd.signing.keys import SigningKey, VerifierKey

__all__ = [
    "Envelope",
    "EnvelopeSignature",
    "KeyRing",
    "MAX_ENVELOPE_SIGNATURES",
    "TrustedKey",
    "pae",
    "sign_envelope",
    "unique_keys",
    "verify_envelope",
]

MAX_ENVELOPE_SIGNATURES = 16
"""Envelopes with more signatures than this are rejected unread."""

_ENVELOPE_FIELDS = frozenset({"payload", "payloadType", "signatures"})
_SIGNATURE_FIELDS = frozenset({"keyid", "sig"})
_URLSAFE_TO_STD = str.maketrans("-_", "+/")
# The canonical one-signature form ``Envelope.to_json`` writes, read by slicing (the audit
# opens a million of these): ``{"payload":"B64","payloadType":"T","signatures":[{"keyid":
# "K","sig":"B64"}]}``. Whatever does not round-trip byte for byte takes the JSON parser.
_HEAD = b'{"payload":"'
_TYPE = b'","payloadType":"'
_SIGS = b'","signatures":[{"keyid":"'
_SIG = b'","sig":"'
_TAIL = b'"}]}'


def pae(payload_type: str, payload: bytes) -> bytes:
    """Compute the DSSE v1 pre-authentication encoding.

    Args:
        payload_type: the payload type, encoded as UTF-8.
        payload: the payload bytes.

    Returns:
        ``b"DSSEv1 " + len(type) + b" " + type + b" " + len(payload) + b" " + payload``.
    """
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


class EnvelopeSignature(NamedTuple):
    """One DSSE signature: the signer's key id (hex) and the raw signature bytes."""

    keyid: str
    sig: bytes


_json_string = json.encoder.encode_basestring  # what json.dumps(..., ensure_ascii=False) uses


def _b64(data: bytes) -> str:
    return pybase64.b64encode(data).decode("ascii")


def unique_keys(error: type[SigningError]) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """A ``json`` ``object_pairs_hook`` that refuses an object with a key twice, as ``error``."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):  # rare: name the first key seen twice
            seen: set[str] = set()
            for k, _ in pairs:
                if k in seen:
                    raise error(f"expected unique JSON keys, got {k!r} twice")
                seen.add(k)
        return out

    return hook


# ``json.loads(text, object_pairs_hook=...)``, without building a decoder per call.
_STRICT_JSON = json.JSONDecoder(object_pairs_hook=unique_keys(SigningError))


def _b64decode(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise MalformedStatementError(
            f"expected a base64 string in {what}, got {type(text).__name__}"
        )
    try:
        # DSSE allows standard or URL-safe base64; map URL-safe to standard, then be strict.
        std = text.translate(_URLSAFE_TO_STD) if "-" in text or "_" in text else text
        data = std.encode("ascii")
        return base64.b64decode(data, validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise MalformedStatementError(f"expected base64 in {what}, got {text[:40]!r}") from e


@dataclass(frozen=True)
class Envelope:
    """A DSSE envelope.

    Attributes:
        payload: the signed payload bytes.
        payload_type: the payload's media type.
        signatures: the signatures over ``pae(payload_type, payload)``.
    """

    payload: bytes
    payload_type: str
    signatures: tuple[EnvelopeSignature, ...]

    def pae(self) -> bytes:
        """Return the bytes the signatures cover.

        Returns:
            ``pae(self.payload_type, self.payload)``.
        """
        return pae(self.payload_type, self.payload)

    def to_json(self) -> bytes:
        """Serialize as canonical JSON.

        Keys sorted, no whitespace, standard base64 for payload and signatures.

        Returns:
            The UTF-8 JSON bytes.
        """
        # The bytes ``json.dumps(obj, sort_keys=True, separators=(",", ":"),
        # ensure_ascii=False)`` writes, built directly (every certificate is serialized once
        # on the certify path): keys in sorted order, strings escaped by the encoder's own
        # function, base64 needs no escaping.
        sigs = ",".join(
            '{"keyid":' + _json_string(s.keyid) + ',"sig":"' + _b64(s.sig) + '"}'
            for s in self.signatures
        )
        text = (
            '{"payload":"'
            + _b64(self.payload)
            + '","payloadType":'
            + _json_string(self.payload_type)
            + ',"signatures":['
            + sigs
            + "]}"
        )
        return text.encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> Envelope:
        """Parse a DSSE envelope from JSON.

        Standard and URL-safe base64 are both accepted. Unknown fields, duplicate keys and
        more than ``MAX_ENVELOPE_SIGNATURES`` signatures are rejected.

        Args:
            data: the JSON bytes.

        Raises:
            MalformedStatementError: the bytes are not a well-formed envelope.

        Returns:
            The envelope (signatures not yet verified).
        """
        fast = _from_canonical(data)
        if fast is not None:
            return fast
        try:
            obj = _STRICT_JSON.decode(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise MalformedStatementError(
                "expected a JSON DSSE envelope, got malformed JSON"
            ) from e
        if not isinstance(obj, dict):
            raise MalformedStatementError(f"expected a JSON object, got {type(obj).__name__}")
        if obj.keys() != _ENVELOPE_FIELDS:
            raise MalformedStatementError(
                f"expected fields {sorted(_ENVELOPE_FIELDS)}, got {sorted(obj)}"
            )
        payload_type = obj["payloadType"]
        if not isinstance(payload_type, str):
            raise MalformedStatementError("expected payloadType to be a string")
        sigs = obj["signatures"]
        if not isinstance(sigs, list) or not sigs:
            raise MalformedStatementError("expected a non-empty list of signatures")
        if len(sigs) > MAX_ENVELOPE_SIGNATURES:
            raise MalformedStatementError(
                f"expected at most {MAX_ENVELOPE_SIGNATURES} signatures, got {len(sigs)}"
            )
        parsed: list[EnvelopeSignature] = []
        for i, s in enumerate(sigs):
            if not isinstance(s, dict) or "sig" not in s or not s.keys() <= _SIGNATURE_FIELDS:
                raise MalformedStatementError(
                    f"expected signature {i} as {{keyid, sig}}, got {s!r:.60}"
                )
            keyid = s.get("keyid", "")
            if not isinstance(keyid, str):
                raise MalformedStatementError(f"expected signature {i} keyid to be a string")
            parsed.append(EnvelopeSignature(keyid, _b64decode(s["sig"], f"signature {i}")))
        return cls(
            payload=_b64decode(obj["payload"], "payload"),
            payload_type=payload_type,
            signatures=tuple(parsed),
        )


def _plain(text: bytes) -> str | None:
    """``text`` as a str when JSON would write it unescaped (printable ASCII, no quote or
    backslash), else None."""
    if not text.isascii() or b"\\" in text:
        return None
    out = text.decode("ascii")
    return out if out.isprintable() else None


def _canonical_b64(text: bytes) -> bytes | None:
    """The bytes ``text`` encodes when it is exactly their standard padded base64 (what
    ``to_json`` writes), else None.

    pybase64's SIMD decoder (~7x the stdlib's here on a 1 KB payload), trusted only through
    the re-encoding: equal bytes prove ``text`` is the canonical encoding of the result,
    which every strict base64 decoder reads as that result.
    """
    try:
        raw = pybase64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if pybase64.b64encode(raw) == text else None


def _from_canonical(data: bytes) -> Envelope | None:
    """The envelope when ``data`` has exactly the layout ``to_json`` writes, else None.

    Every separator is compared, the strings hold nothing JSON escapes and the base64 is
    the canonical encoding of its bytes (``_canonical_b64``), so the result is the one the
    JSON parser would give; anything else returns None for it to decide.
    """
    if not data.startswith(_HEAD) or not data.endswith(_TAIL):
        return None
    p1 = data.find(b'"', 12)
    t0 = p1 + len(_TYPE)
    t1 = data.find(b'"', t0)
    k0 = t1 + len(_SIGS)
    k1 = data.find(b'"', k0)
    s0 = k1 + len(_SIG)
    s1 = len(data) - len(_TAIL)
    if p1 < 0 or t1 < 0 or k1 < 0 or s0 > s1 or data.find(b'"', s0) != s1:
        return None
    if data[p1:t0] != _TYPE or data[t1:k0] != _SIGS or data[k1:s0] != _SIG:
        return None
    payload_type, keyid = _plain(data[t0:t1]), _plain(data[k0:k1])
    if payload_type is None or keyid is None:
        return None
    payload, sig = _canonical_b64(data[12:p1]), _canonical_b64(data[s0:s1])
    if payload is None or sig is None:
        return None
    return Envelope(payload, payload_type, (EnvelopeSignature(keyid, sig),))


def sign_envelope(
    payload: bytes, payload_type: str, key: SigningKey | Sequence[SigningKey]
) -> Envelope:
    """Sign a payload into a DSSE envelope.

    Args:
        payload: the payload bytes.
        payload_type: the payload's media type.
        key: one signing key or several.

    Raises:
        SigningError: no key is given.

    Returns:
        The envelope, one signature per key, keyid = the key's C2SP key id in hex.
    """
    keys = [key] if isinstance(key, SigningKey) else list(key)
    if not keys:
        raise SigningError("expected at least one signing key, got none")
    message = pae(payload_type, payload)
    sigs = tuple(EnvelopeSignature(k.key_id_hex, k.sign(message)) for k in keys)
    return Envelope(payload=payload, payload_type=payload_type, signatures=sigs)


def _candidates(
    trusted: Mapping[str, VerifierKey] | KeyRing,
    keyid: str,
    at_time: int | None,
    at_index: int | None = None,
) -> tuple[VerifierKey, ...]:
    if isinstance(trusted, KeyRing):
        return trusted.lookup(keyid, at_time, at_index)
    key = trusted.get(keyid)
    return () if key is None else (key,)


def verify_envelope(
    envelope: Envelope,
    trusted: Mapping[str, VerifierKey] | KeyRing,
    *,
    at_time: int | None = None,
    at_index: int | None = None,
) -> bytes:
    """Verify that a trusted key signed an envelope.

    One verifying signature by a trusted key suffices; signatures by unknown key ids are
    skipped.

    Args:
        envelope: the envelope.
        trusted: trusted keys by key id hex, or a KeyRing.
        at_time: POSIX seconds the key must be valid at (KeyRing windows), or None.
        at_index: the ledger index of the entry (KeyRing index windows), or None.

    Raises:
        RotatedKeyError: the only trusted signers are outside their index windows.
        UnknownKeyError: no signature's key id is trusted (and valid at ``at_time``).
        BadSignatureError: a trusted key's signature does not verify.

    Returns:
        The payload bytes.
    """
    if len(envelope.signatures) > MAX_ENVELOPE_SIGNATURES:
        raise SigningError(
            f"expected at most {MAX_ENVELOPE_SIGNATURES} signatures, got {len(envelope.signatures)}"
        )
    message = envelope.pae()
    failures: list[str] = []
    known = rotated = False
    for sig in envelope.signatures:
        keys = _candidates(trusted, sig.keyid, at_time, at_index)
        if not keys:
            if at_index is not None and _candidates(trusted, sig.keyid, at_time):
                rotated = True
                failures.append(
                    f"{sig.keyid!r}: rotated (not this log's key at ledger index {at_index})"
                )
                continue
            failures.append(f"{sig.keyid!r}: {_why_untrusted(trusted, sig.keyid, at_time)}")
            continue
        known = True
        for key in keys:
            try:
                key.verify(message, sig.sig)
            except SigningError as e:
                failures.append(f"{sig.keyid!r}: {e}")
                continue
            return envelope.payload
    error = BadSignatureError if known else RotatedKeyError if rotated else UnknownKeyError
    raise error("expected a signature that verifies with a trusted key, got " + "; ".join(failures))


def _why_untrusted(
    trusted: Mapping[str, VerifierKey] | KeyRing, keyid: str, at_time: int | None
) -> str:
    if isinstance(trusted, KeyRing) and trusted.lookup(keyid):
        return f"not a trusted key at {at_time} (the key with this id is outside its window)"
    return "not a trusted key"
