"""``open_statement``: each step of the one trust path fails with its own error."""

from __future__ import annotations

import base64
import json

import pytest

from certd.errors import (
    BadSignatureError,
    MalformedStatementError,
    UnknownKeyError,
    WrongPredicateError,
)
from certd.signing.dsse import KeyRing, TrustedKey, sign_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, make_statement
from certd.signing.keys import SigningKey
from certd.statements import (
    PREDICATE_FEASIBILITY,
    PREDICATE_VERDICT_RECEIPT,
    open_statement,
    receipt_predicate,
)

KEY = SigningKey("certd.example/log", bytes(range(32)))
ROOT = bytes(range(32))


def receipt(issued_at: int = 100, **change: object) -> bytes:
    predicate = receipt_predicate(
        batch_root=ROOT, batch_size=2, verifiers=["v"], issued_at=issued_at
    )
    predicate.update(change)
    return make_statement([("verdict-batch", ROOT.hex())], PREDICATE_VERDICT_RECEIPT, predicate)


def envelope(body: bytes, key: SigningKey = KEY, payload_type: str = IN_TOTO_PAYLOAD_TYPE) -> bytes:
    return sign_envelope(body, payload_type, key).to_json()


RING = KeyRing([KEY.verifier()])


def test_an_honest_statement_opens() -> None:
    st = open_statement(envelope(receipt()), RING, PREDICATE_VERDICT_RECEIPT)
    assert st.predicate["batch_size"] == 2


def test_the_key_must_be_valid_at_the_statements_time() -> None:
    window = KeyRing([TrustedKey(KEY.verifier(), not_before=50, not_after=150)])
    assert open_statement(envelope(receipt(100)), window, PREDICATE_VERDICT_RECEIPT)
    with pytest.raises(UnknownKeyError, match="at 200"):  # signed after the key was retired
        open_statement(envelope(receipt(200)), window, PREDICATE_VERDICT_RECEIPT)
    with pytest.raises(UnknownKeyError):
        open_statement(
            envelope(receipt(), SigningKey.generate("other.example/k")),
            RING,
            PREDICATE_VERDICT_RECEIPT,
        )


def test_each_other_step_has_its_error() -> None:
    with pytest.raises(MalformedStatementError, match="payloadType"):
        open_statement(
            envelope(receipt(), payload_type="application/json"), RING, PREDICATE_VERDICT_RECEIPT
        )
    with pytest.raises(MalformedStatementError):
        open_statement(b"{not json", RING, PREDICATE_VERDICT_RECEIPT)
    with pytest.raises(WrongPredicateError):
        open_statement(envelope(receipt()), RING, PREDICATE_FEASIBILITY)
    with pytest.raises(MalformedStatementError, match="batch_size"):
        open_statement(envelope(receipt(batch_size="2")), RING, PREDICATE_VERDICT_RECEIPT)
    with pytest.raises(MalformedStatementError, match="subject verdict-batch"):
        open_statement(envelope(receipt(batch_root="00" * 32)), RING, PREDICATE_VERDICT_RECEIPT)
    with pytest.raises(MalformedStatementError, match="issued_at"):
        open_statement(envelope(receipt(issued_at=True)), RING, PREDICATE_VERDICT_RECEIPT)  # type: ignore[arg-type]


def flip_signature(data: bytes) -> bytes:
    env = json.loads(data)
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[0] ^= 1
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    return json.dumps(env).encode()


def test_a_flipped_signature_is_a_bad_signature() -> None:
    with pytest.raises(BadSignatureError):
        open_statement(flip_signature(envelope(receipt())), RING, PREDICATE_VERDICT_RECEIPT)


def test_payloads_the_strict_parse_refuses_fail_as_step_by_step() -> None:
    """Duplicate keys or non-UTF-8 payloads: the signature is still checked first."""
    body = receipt()
    duplicated = body[:-1] + b',"_type":"https://in-toto.io/Statement/v1"}'
    with pytest.raises(MalformedStatementError, match="'_type' twice"):
        open_statement(envelope(duplicated), RING, PREDICATE_VERDICT_RECEIPT)
    with pytest.raises(BadSignatureError):
        open_statement(flip_signature(envelope(duplicated)), RING, PREDICATE_VERDICT_RECEIPT)
    other = SigningKey.generate("certd.example/log")
    impostor = KeyRing([other.verifier()])
    with pytest.raises(UnknownKeyError):
        open_statement(envelope(duplicated), impostor, PREDICATE_VERDICT_RECEIPT)
    utf16 = body.decode().encode("utf-16")  # JSON, read for issued_at, but not UTF-8
    with pytest.raises(MalformedStatementError, match="malformed JSON"):
        open_statement(envelope(utf16), RING, PREDICATE_VERDICT_RECEIPT)
    window = KeyRing([TrustedKey(KEY.verifier(), not_before=50, not_after=150)])
    with pytest.raises(UnknownKeyError, match="at 200"):  # the window is still applied
        open_statement(envelope(receipt(200).decode().encode("utf-16")), window, "x")


def test_url_safe_base64_envelopes_open() -> None:
    env = json.loads(envelope(receipt()))
    env["payload"] = base64.urlsafe_b64encode(base64.b64decode(env["payload"])).decode()
    env["signatures"][0]["sig"] = base64.urlsafe_b64encode(
        base64.b64decode(env["signatures"][0]["sig"])
    ).decode()
    assert set("-_") & set(env["signatures"][0]["sig"])  # the URL-safe alphabet is exercised
    st = open_statement(json.dumps(env).encode(), RING, PREDICATE_VERDICT_RECEIPT)
    assert st.predicate["batch_size"] == 2
