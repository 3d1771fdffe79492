"""DSSE envelopes, key rings and in-toto statements."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest

from certd.errors import InvalidInputError, SigningError
from certd.signing.dsse import (
    MAX_ENVELOPE_SIGNATURES,
    Envelope,
    EnvelopeSignature,
    KeyRing,
    TrustedKey,
    pae,
    sign_envelope,
    verify_envelope,
)
from certd.signing.intoto import (
    IN_TOTO_PAYLOAD_TYPE,
    STATEMENT_TYPE,
    canonical_json,
    make_statement,
    parse_statement,
    sha256_hex,
    verify_statement_envelope,
)
from certd.signing.keys import SigningKey

KEY = SigningKey("certd.example/log", bytes(range(32)))
DIGEST = sha256_hex(b"task")


def test_pae_layout() -> None:
    assert pae("t", b"") == b"DSSEv1 1 t 0 "
    assert pae("\u00e9", b"ab") == b"DSSEv1 2 \xc3\xa9 2 ab"  # byte lengths, UTF-8 type


def test_sign_verify_and_canonical_json() -> None:
    env = sign_envelope(b"payload", "text/plain", KEY)
    assert env.signatures[0].keyid == KEY.key_id_hex
    data = env.to_json()
    obj = json.loads(data)
    assert list(obj) == ["payload", "payloadType", "signatures"]
    assert b" " not in data
    assert obj["payload"] == base64.b64encode(b"payload").decode()
    assert Envelope.from_json(data) == env
    assert verify_envelope(env, KeyRing([KEY.verifier()])) == b"payload"
    assert verify_envelope(env, {KEY.key_id_hex: KEY.verifier()}) == b"payload"


def test_verify_failures_name_the_problem() -> None:
    env = sign_envelope(b"payload", "text/plain", KEY)
    ring = KeyRing([KEY.verifier()])
    with pytest.raises(SigningError, match="does not verify with key"):
        verify_envelope(Envelope(b"payloaD", env.payload_type, env.signatures), ring)
    with pytest.raises(SigningError, match="does not verify with key"):
        verify_envelope(Envelope(env.payload, "text/html", env.signatures), ring)
    with pytest.raises(SigningError, match="not a trusted key"):
        verify_envelope(env, KeyRing([SigningKey.generate("other").verifier()]))


def test_one_good_signature_suffices() -> None:
    stranger = SigningKey.generate("stranger")
    env = sign_envelope(b"p", "t", [stranger, KEY])
    assert verify_envelope(env, KeyRing([KEY.verifier()])) == b"p"


def test_keyring_windows() -> None:
    ring = KeyRing([TrustedKey(KEY.verifier(), not_before=100, not_after=200)])
    env = sign_envelope(b"p", "t", KEY)
    assert ring.lookup(KEY.key_id_hex) == (KEY.verifier(),)
    assert ring.lookup(KEY.key_id_hex, at_time=150) == (KEY.verifier(),)
    assert ring.lookup(KEY.key_id_hex, at_time=200) == (KEY.verifier(),)
    assert ring.lookup(KEY.key_id_hex, at_time=201) == ()
    assert ring.lookup(KEY.key_id_hex, at_time=99) == ()
    assert verify_envelope(env, ring, at_time=150) == b"p"
    with pytest.raises(SigningError, match="not a trusted key"):
        verify_envelope(env, ring, at_time=300)
    with pytest.raises(SigningError, match="not_after >= not_before"):
        TrustedKey(KEY.verifier(), not_before=5, not_after=4)
    assert len(ring) == 1 and [t.key for t in ring] == [KEY.verifier()]


def test_keyring_lookup_answers_the_windows_of_every_key_under_an_id() -> None:
    """A key without windows is found at any time and index; once a windowed key shares
    its id (a rotation re-trusting the same key), the windows decide again."""
    ring = KeyRing([KEY.verifier()])
    assert ring.lookup(KEY.key_id_hex, at_time=1, at_index=10**9) == (KEY.verifier(),)
    ring.add(TrustedKey(KEY.verifier(), first_index=5))
    assert ring.lookup(KEY.key_id_hex, at_index=3) == (KEY.verifier(),)
    assert ring.lookup(KEY.key_id_hex, at_index=7) == (KEY.verifier(), KEY.verifier())
    windowed = KeyRing([TrustedKey(KEY.verifier(), last_index=2)])
    windowed.add(TrustedKey(KEY.verifier(), not_after=50))
    assert windowed.lookup(KEY.key_id_hex, at_time=60, at_index=1) == (KEY.verifier(),)
    assert windowed.lookup(KEY.key_id_hex, at_time=60, at_index=3) == ()
    assert ring.lookup("00000000") == ()


def _env_json(**overrides: object) -> bytes:
    obj: dict[str, object] = {
        "payload": base64.b64encode(b"p").decode(),
        "payloadType": "t",
        "signatures": [{"keyid": "00000000", "sig": base64.b64encode(b"s" * 64).decode()}],
    }
    obj.update(overrides)
    return json.dumps(obj).encode()


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"\xff\xfe",
        b"[]",
        _env_json(extra=1),
        _env_json(payload="!!"),
        _env_json(payloadType=5),
        _env_json(signatures=[]),
        _env_json(signatures="x"),
        _env_json(signatures=[{"keyid": 5, "sig": "AAAA"}]),
        _env_json(signatures=[{"keyid": "a"}]),
        _env_json(signatures=[{"keyid": "a", "sig": "AAAA", "x": 1}]),
        _env_json(signatures=[{"sig": "AAAA"}] * (MAX_ENVELOPE_SIGNATURES + 1)),
        b'{"payload":"cA==","payload":"cA==","payloadType":"t","signatures":[]}',
    ],
)
def test_from_json_rejects_malformed(data: bytes) -> None:
    with pytest.raises(SigningError):
        Envelope.from_json(data)


def test_from_json_accepts_urlsafe_base64() -> None:
    raw = b"\xfb\xff\xbf"
    data = _env_json(payload=base64.urlsafe_b64encode(raw).decode())
    assert Envelope.from_json(data).payload == raw


def test_too_many_signatures_refused_at_verify() -> None:
    env = sign_envelope(b"p", "t", KEY)
    many = Envelope(b"p", "t", tuple([EnvelopeSignature("x", b"")] * 17) + env.signatures)
    with pytest.raises(SigningError, match="at most 16"):
        verify_envelope(many, KeyRing([KEY.verifier()]))


# --- statements -----------------------------------------------------------------------------


def test_statement_round_trip_canonical() -> None:
    body = make_statement([("task", DIGEST)], "https://forkgate.dev/p/v1", {"b": 1, "a": "é"})
    expected = (
        '{"_type":"https://in-toto.io/Statement/v1","predicate":{"a":"é","b":1},'
        '"predicateType":"https://forkgate.dev/p/v1",'
        f'"subject":[{{"digest":{{"sha256":"{DIGEST}"}},"name":"task"}}]}}'
    ).encode()
    assert body == expected
    st = parse_statement(body)
    assert st.subjects == (("task", DIGEST),)
    assert st.predicate == {"a": "é", "b": 1}
    assert st.to_json() == body


def _statement(**overrides: object) -> bytes:
    obj: dict[str, object] = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": "t", "digest": {"sha256": DIGEST}}],
        "predicateType": "https://x/p",
        "predicate": {},
    }
    obj.update(overrides)
    return json.dumps(obj).encode()


@pytest.mark.parametrize(
    "data",
    [
        _statement(_type="https://in-toto.io/Statement/v0.1"),
        _statement(subject=[]),
        _statement(subject=[{"name": "t", "digest": {"sha256": DIGEST.upper()}}]),
        _statement(subject=[{"name": "t", "digest": {"sha256": DIGEST[:-1]}}]),
        _statement(subject=[{"name": "t", "digest": {"sha512": DIGEST}}]),
        _statement(subject=[{"digest": {"sha256": DIGEST}}]),
        _statement(predicateType=""),
        _statement(predicate=[1]),
        _statement(extra=True),
        b"[1]",
        b"{",
    ],
)
def test_parse_statement_rejects(data: bytes) -> None:
    with pytest.raises(SigningError):
        parse_statement(data)


def test_make_statement_rejects() -> None:
    with pytest.raises(SigningError):
        make_statement([], "https://x/p", {})
    with pytest.raises(SigningError):
        make_statement([("t", "xyz")], "https://x/p", {})
    with pytest.raises(SigningError, match="cannot serialize"):
        make_statement([("t", DIGEST)], "https://x/p", {"x": float("nan")})


def test_canonical_json() -> None:
    assert canonical_json({"b": [1, 2], "a": None}) == b'{"a":null,"b":[1,2]}'
    with pytest.raises(InvalidInputError):
        canonical_json({"x": object()})


def test_verify_statement_envelope() -> None:
    body = make_statement([("task", DIGEST)], "https://x/p", {"k": 1})
    env = sign_envelope(body, IN_TOTO_PAYLOAD_TYPE, KEY)
    assert verify_statement_envelope(env, KeyRing([KEY.verifier()])).predicate == {"k": 1}
    other = sign_envelope(body, "application/json", KEY)
    with pytest.raises(SigningError, match="payloadType"):
        verify_statement_envelope(other, KeyRing([KEY.verifier()]))


def test_pure_parts_import_light() -> None:
    code = (
        "import sys, certd.signing, certd.ledger, certd.tlog.merkle, "
        "certd.tlog.checkpoint\n"
        "bad = [m for m in sys.modules if m in ('sqlite3', 'pydantic', 'grpc') or "
        "m.startswith(('certd.ledger.store', 'certd.ledger.store.sqlite', 'certd.ledger.log', "
        "'certd.ledger.audit'))]\n"
        "print(','.join(bad))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "", f"pure modules pulled in: {run.stdout}"


@pytest.mark.parametrize(
    ("payload_type", "keyids"),
    [
        (IN_TOTO_PAYLOAD_TYPE, ["ab" * 32]),
        ('odd "type"\\ é\n\x01', ["k\u00e9y", 'q"uote', "\x1f"]),
        ("t", []),
    ],
)
def test_to_json_writes_the_bytes_json_dumps_writes(payload_type: str, keyids: list[str]) -> None:
    # to_json builds the canonical bytes directly; they must stay those of the sorted,
    # compact json.dumps form, whatever the strings hold.
    env = Envelope(
        b'{"x": "\xc3\xa9"}\x00\xff',
        payload_type,
        tuple(EnvelopeSignature(k, bytes([i]) * 64) for i, k in enumerate(keyids)),
    )
    obj = {
        "payload": base64.b64encode(env.payload).decode("ascii"),
        "payloadType": env.payload_type,
        "signatures": [
            {"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode("ascii")}
            for s in env.signatures
        ],
    }
    want = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert env.to_json() == want.encode("utf-8")
