"""Keys, signed notes and cosignatures: round trips and every way to get them wrong."""

from __future__ import annotations

import base64
import os
import re
import stat
from pathlib import Path

import pytest

from certd.errors import SigningError
from certd.signing.keys import (
    SIG_TYPE_COSIGNATURE_V1,
    SIG_TYPE_ED25519,
    SigningKey,
    VerifierKey,
    load_signing_key,
    save_signing_key,
    validate_key_name,
)
from certd.signing.note import (
    MAX_SIGNATURES,
    add_signature_lines,
    cosign,
    open_note,
    sign_note,
)

SEED = bytes(range(32))


@pytest.fixture
def key() -> SigningKey:
    return SigningKey("certd.example/log", SEED)


# --- keys -----------------------------------------------------------------------------------


def test_private_string_round_trip(key: SigningKey) -> None:
    text = key.to_private_string()
    assert text.startswith("PRIVATE+KEY+certd.example/log+" + key.key_id_hex + "+")
    again = SigningKey.from_private_string(text)
    assert again.public_key == key.public_key and again.key_id == key.key_id


def test_vkey_round_trip_and_key_id(key: SigningKey) -> None:
    vkey = key.verifier().to_vkey()
    parsed = VerifierKey.from_vkey(vkey)
    assert parsed == key.verifier()
    assert parsed.key_id_hex == key.key_id_hex and len(parsed.key_id_hex) == 8
    assert parsed.sig_type == SIG_TYPE_ED25519
    cos = VerifierKey.from_vkey(key.cosigner_verifier().to_vkey())
    assert cos.sig_type == SIG_TYPE_COSIGNATURE_V1
    assert cos.key_id != parsed.key_id  # the type byte enters the key id


def test_sign_and_verify(key: SigningKey) -> None:
    sig = key.sign(b"msg")
    key.verifier().verify(b"msg", sig)
    with pytest.raises(SigningError, match=r"does not verify with key certd\.example/log"):
        key.verifier().verify(b"msh", sig)
    with pytest.raises(SigningError, match="expected a 64-byte Ed25519 signature, got 63"):
        key.verifier().verify(b"msg", sig[:63])


@pytest.mark.parametrize("name", ["", "a b", "a+b", "tab\there", "nl\n", "nbsp\u00a0x", "\x7f"])
def test_invalid_key_names(name: str) -> None:
    with pytest.raises(SigningError):
        validate_key_name(name)
    with pytest.raises(SigningError):
        SigningKey(name, SEED)


def test_repr_hides_private_key(key: SigningKey) -> None:
    private_b64 = key.to_private_string().rsplit("+", 1)[1]
    assert private_b64 not in repr(key)
    assert key.key_id_hex in repr(key)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda s: s.replace("PRIVATE+KEY+", "PRIVATE+KEX+"),
        lambda s: s.rsplit("+", 1)[0] + "+!!!!",
        lambda s: s.rsplit("+", 2)[0] + "+00000000+" + s.rsplit("+", 1)[1],  # wrong key id
        lambda s: s.rsplit("+", 2)[0] + "+ABCDEF01+" + s.rsplit("+", 1)[1],  # uppercase id
        lambda s: "PRIVATE+KEY+onlyname",
    ],
)
def test_bad_private_strings(key: SigningKey, mutate: object) -> None:
    assert callable(mutate)
    with pytest.raises(SigningError):
        SigningKey.from_private_string(mutate(key.to_private_string()))


def test_private_string_wrong_type_byte(key: SigningKey) -> None:
    blob = base64.b64encode(b"\x04" + SEED).decode()
    with pytest.raises(SigningError, match="0x01 followed by a 32-byte seed"):
        SigningKey.from_private_string(f"PRIVATE+KEY+certd.example/log+{key.key_id_hex}+{blob}")


def test_bad_vkeys(key: SigningKey) -> None:
    good = key.verifier().to_vkey()
    name, kid, b64 = good.split("+", 2)
    with pytest.raises(SigningError, match="expected key id"):
        VerifierKey.from_vkey(f"{name}+00000000+{b64}")
    with pytest.raises(SigningError, match="33 bytes"):
        VerifierKey.from_vkey(f"{name}+{kid}+" + base64.b64encode(b"\x01" + b"x" * 31).decode())
    with pytest.raises(SigningError, match="signature type"):
        VerifierKey.from_vkey(f"{name}+{kid}+" + base64.b64encode(b"\x02" + b"x" * 32).decode())
    with pytest.raises(SigningError):
        VerifierKey.from_vkey("no-plus-signs")


def test_save_and_load_key_file(tmp_path: Path, key: SigningKey) -> None:
    path = tmp_path / "log.key"
    save_signing_key(path, key)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_signing_key(path).key_id == key.key_id
    other = SigningKey.generate("certd.example/other")
    save_signing_key(path, other)  # atomic replace of an existing file
    assert load_signing_key(path).name == "certd.example/other"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.key"]  # no temp files left


def test_load_key_errors(tmp_path: Path) -> None:
    with pytest.raises(SigningError, match="cannot read key file"):
        load_signing_key(tmp_path / "absent.key")
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    with pytest.raises(SigningError):
        load_signing_key(bad)
    with pytest.raises(SigningError, match="cannot write key file"):
        save_signing_key(tmp_path / "no-such-dir" / "k", SigningKey.generate("x"))


# --- notes ----------------------------------------------------------------------------------


def test_note_with_several_signers(key: SigningKey) -> None:
    other = SigningKey.generate("witness.example/w")
    signed = sign_note("line one\n\nline three\n", [key, other, key])
    assert signed.count("\u2014 ") == 2  # a key given twice signs once
    note = open_note(signed, [key.verifier(), other.verifier()])
    assert note.text == "line one\n\nline three\n"
    assert note.signers == ("certd.example/log", "witness.example/w")


def test_unknown_signatures_are_ignored(key: SigningKey) -> None:
    stranger = SigningKey.generate("stranger.example/k")
    signed = sign_note("text\n", [stranger, key])
    assert open_note(signed, [key.verifier()]).signers == ("certd.example/log",)
    # Same name, different key: unknown (name and id must both match), so ignored.
    impostor = SigningKey("certd.example/log", os.urandom(32))
    signed2 = sign_note("text\n", [impostor, key])
    assert open_note(signed2, [key.verifier()]).signers == ("certd.example/log",)


def test_known_key_with_bad_signature_rejects_note(key: SigningKey) -> None:
    signed = sign_note("text\n", key)
    text, line = signed.split("\n\n")
    blob = bytearray(base64.b64decode(line.split(" ")[2]))
    blob[10] ^= 1
    forged = text + "\n\n\u2014 certd.example/log " + base64.b64encode(blob).decode() + "\n"
    with pytest.raises(SigningError, match="does not verify"):
        open_note(forged, [key.verifier()])


def test_no_trusted_signature(key: SigningKey) -> None:
    signed = sign_note("text\n", SigningKey.generate("other.example/k"))
    with pytest.raises(SigningError, match="expected a signature by a trusted key"):
        open_note(signed, [key.verifier()])


def test_tampered_text_fails(key: SigningKey) -> None:
    signed = sign_note("amount 1\n", key)
    with pytest.raises(SigningError):
        open_note(signed.replace("amount 1", "amount 9"), [key.verifier()])


@pytest.mark.parametrize(
    ("signed", "match"),
    [
        ("no blank line\n\u2014 certd.example/log AAAA\n", "blank line"),
        ("text\n\nnot a signature line\n", "starting with '\u2014 '"),
        ("text\n\n\u2014 certd.example/log not!base64\n", "base64"),
        ("text\n\n\u2014 certd.example/log AAAA\n", "key id and signature"),
        ("text\n\n\u2014 certd.example/log\n", "<name> <base64>"),
        ("text\n\n\u2014 certd.example/log AAAAAAAA", "ending in a newline"),
        ("te\rxt\n\n\u2014 certd.example/log AAAAAAAA\n", "control character"),
        ("text\n\n\u2014 bad+name AAAAAAAA\n", "key name"),
    ],
)
def test_malformed_notes(key: SigningKey, signed: str, match: str) -> None:
    with pytest.raises(SigningError, match=re.escape(match)):
        open_note(signed, [key.verifier()])


def test_sign_rejects_bad_text(key: SigningKey) -> None:
    with pytest.raises(SigningError, match="ending in a newline"):
        sign_note("no newline", key)
    with pytest.raises(SigningError, match="control character"):
        sign_note("bell\x07\n", key)
    with pytest.raises(SigningError, match="at least one signing key"):
        sign_note("x\n", [])


def test_too_many_signatures(key: SigningKey) -> None:
    signed = sign_note("x\n", key)
    extra = [sign_note("x\n", SigningKey.generate(f"k{i}")).split("\n\n")[1] for i in range(3)]
    many = add_signature_lines(signed, extra)
    assert open_note(many, [key.verifier()], max_signatures=4).signers == ("certd.example/log",)
    with pytest.raises(SigningError, match="at most 3 signature lines, got 4"):
        open_note(many, [key.verifier()], max_signatures=3)
    assert MAX_SIGNATURES >= 16  # the spec's minimum


# --- cosignatures ---------------------------------------------------------------------------


def test_cosignature_round_trip_and_tamper(key: SigningKey) -> None:
    witness = SigningKey.generate("witness.example/w1")
    text = "certd.example/log\n3\n" + base64.b64encode(b"r" * 32).decode() + "\n"
    signed = sign_note(text, key)
    line = cosign(text, witness, 1_700_000_000)
    cosigned = add_signature_lines(signed, [line])
    assert add_signature_lines(cosigned, [line]) == cosigned  # not repeated
    note = open_note(cosigned, [key.verifier(), witness.cosigner_verifier()])
    assert note.signers == ("certd.example/log", "witness.example/w1")
    assert note.signatures[1].timestamp == 1_700_000_000
    # Changing the timestamp breaks the signature.
    blob = bytearray(base64.b64decode(line.split(" ")[2]))
    blob[11] ^= 1
    bad = line.rsplit(" ", 1)[0] + " " + base64.b64encode(blob).decode()
    with pytest.raises(SigningError, match="does not verify"):
        open_note(add_signature_lines(signed, [bad]), [witness.cosigner_verifier()])


def test_cosign_rejects_bad_timestamp(key: SigningKey) -> None:
    with pytest.raises(SigningError, match="timestamp"):
        cosign("x\n", key, -1)
    with pytest.raises(SigningError, match="timestamp"):
        cosign("x\n", key, 2**63)
