"""Ed25519 verification through libsodium (PyNaCl) and cryptography agree."""

from __future__ import annotations

import os

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from certd.signing import keys
from certd.signing.keys import SigningKey


def test_both_backends_accept_good_and_reject_bad_signatures() -> None:
    key = SigningKey.generate("test.example/backends")
    pub = Ed25519PublicKey.from_public_bytes(key.public_key)
    fast = keys._load_libsodium_verify()
    assert fast is not keys._verify_with_cryptography, "PyNaCl is installed with the server extra"
    for n in range(50):
        msg = os.urandom(n * 7)
        sig = key.sign(msg)
        flipped = bytes([sig[0] ^ 1]) + sig[1:]
        for verify in (fast, keys._verify_with_cryptography):
            assert verify(pub, key.public_key, msg, sig)
            assert not verify(pub, key.public_key, msg, flipped)
            assert not verify(pub, key.public_key, msg + b"x", sig)
