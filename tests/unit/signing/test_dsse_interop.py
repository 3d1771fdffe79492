"""Interop: certd's DSSE envelopes verify with securesystemslib's DSSE, and the other way.

securesystemslib (secure-systems-lab, the DSSE authors' Python implementation) is an
independent reading of the PAE and the envelope JSON; both directions must agree.
"""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from certd.errors import BadSignatureError
from certd.signing.dsse import KeyRing, sign_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, make_statement
from certd.signing.keys import SigningKey
from certd.statements import PREDICATE_VERDICT_RECEIPT, open_statement, receipt_predicate

dsse = pytest.importorskip("securesystemslib.dsse", reason="securesystemslib (dev extra)")
signer_mod = pytest.importorskip("securesystemslib.signer")
exceptions = pytest.importorskip("securesystemslib.exceptions")

SEED = bytes(range(32))
KEY = SigningKey("certd.example/log", SEED)


def _statement() -> bytes:
    root = bytes(32)
    return make_statement(
        [("verdict-batch", root.hex())],
        PREDICATE_VERDICT_RECEIPT,
        receipt_predicate(batch_root=root, batch_size=1, verifiers=["v"], issued_at=1),
    )


def _their_key() -> object:
    return signer_mod.SSlibKey(
        keyid=KEY.key_id_hex,
        keytype="ed25519",
        scheme="ed25519",
        keyval={"public": KEY.public_key.hex()},
    )


def test_certd_envelopes_verify_with_securesystemslib() -> None:
    env = sign_envelope(_statement(), IN_TOTO_PAYLOAD_TYPE, KEY)
    theirs = dsse.Envelope.from_dict(json.loads(env.to_json()))
    assert theirs.pae() == env.pae()
    accepted = theirs.verify([_their_key()], 1)
    assert set(accepted) == {KEY.key_id_hex}
    assert theirs.payload == _statement() and theirs.payload_type == IN_TOTO_PAYLOAD_TYPE
    # a flipped payload byte fails in their implementation too
    theirs.payload = theirs.payload.replace(b'"batch_size":1', b'"batch_size":2')
    with pytest.raises(exceptions.VerificationError):
        theirs.verify([_their_key()], 1)


def test_securesystemslib_envelopes_open_through_certd() -> None:
    theirs = dsse.Envelope(_statement(), IN_TOTO_PAYLOAD_TYPE, {})
    signer = signer_mod.CryptoSigner(Ed25519PrivateKey.from_private_bytes(SEED), _their_key())
    theirs.sign(signer)
    data = json.dumps(theirs.to_dict()).encode()
    ring = KeyRing([KEY.verifier()])
    st = open_statement(data, ring, PREDICATE_VERDICT_RECEIPT)
    assert st.predicate["batch_size"] == 1
    tampered = dict(theirs.to_dict())
    sig = bytearray(theirs.signatures[KEY.key_id_hex].signature.encode())
    sig[0] = ord("0") if sig[0] != ord("0") else ord("1")
    tampered["signatures"] = [{"keyid": KEY.key_id_hex, "sig": _b64_of_hex(sig.decode())}]
    with pytest.raises(BadSignatureError):
        open_statement(json.dumps(tampered).encode(), ring, PREDICATE_VERDICT_RECEIPT)


def _b64_of_hex(hex_sig: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_sig)).decode()
