"""Ed25519 verification through ed25519-dalek (solders), libsodium (PyNaCl) and cryptography
agree, on honest signatures and on forged ones (``tests/ed25519_ref.py``)."""

from __future__ import annotations

import os
import subprocess
import sys

import ed25519_ref
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from certd.errors import SigningError
from certd.signing import ed25519
from certd.signing.keys import SigningKey, VerifierKey


def test_both_backends_accept_good_and_reject_bad_signatures() -> None:
    key = SigningKey.generate("test.example/backends")
    pub = Ed25519PublicKey.from_public_bytes(key.public_key)
    fast = ed25519.load_libsodium_verify()
    assert fast is not ed25519.verify_with_cryptography, "PyNaCl is installed with the server extra"
    for n in range(50):
        msg = os.urandom(n * 7)
        sig = key.sign(msg)
        flipped = bytes([sig[0] ^ 1]) + sig[1:]
        for verify in (fast, ed25519.verify_with_cryptography):
            assert verify(pub, key.public_key, msg, sig)
            assert not verify(pub, key.public_key, msg, flipped)
            assert not verify(pub, key.public_key, msg + b"x", sig)


def test_dalek_fast_path_agrees_with_libsodium_on_forged_signatures() -> None:
    """ed25519-dalek's verify_strict (the fast path where the C extension is not built)
    refuses every signature libsodium does: non-canonical s, mixed-order and small-order R,
    non-canonical R, small-order keys, flipped bits; fresh forgeries each round (a lax
    verifier accepts several: bench/bench_ed25519.py)."""
    dalek = ed25519.load_dalek_verify()  # the fast path when the C extension is not built
    assert dalek is not None, "solders is installed with the server extra"
    for n in range(12):
        seed, msg = os.urandom(32), os.urandom(n * 37)
        pub = ed25519_ref.public_key(seed)
        good = ed25519_ref.sign_with(seed, msg)
        fast = dalek(pub)
        assert fast is not None
        assert ed25519_ref.sodium_accepts(pub, msg, good) and fast(msg, good)
        assert good == SigningKey(  # the reference signs as RFC 8032 does
            "test.example/ref", seed
        ).sign(msg)
        for what, bad_pub, bad_sig in ed25519_ref.bad_signatures(seed, msg):
            assert not ed25519_ref.sodium_accepts(bad_pub, msg, bad_sig), what
            bad_fast = dalek(bad_pub)
            assert bad_fast is None or not bad_fast(msg, bad_sig), what
            try:
                key = VerifierKey("test.example/forged", bad_pub)
            except SigningError:
                continue
            with pytest.raises(SigningError):
                key.verify(msg, bad_sig)


def test_non_canonical_key_encoding_gets_no_fast_path() -> None:
    """dalek does not check that a key's y is below p; libsodium does, so such a key keeps
    libsodium's answer (a key with y = p + 2 or the identity's y = p + 1)."""
    for prepared in (ed25519.load_dalek_verify(), ed25519.load_fixed_key_verify()):
        assert prepared is not None
        for y in (ed25519_ref.P + 1, ed25519_ref.P + 2, 2**255 - 1):
            assert prepared(int.to_bytes(y, 32, "little")) is None
        assert prepared(SigningKey.generate("test.example/k").public_key) is not None


def test_importing_the_keys_loads_no_fast_path() -> None:
    """solders takes ~0.2 s to import and a key's table ~1 ms to build: only bulk
    verification (the audit) turns the fast path on."""
    code = (
        "import sys; import certd.signing.keys as k; "
        "assert not {'solders', 'certd.signing.fixedkey._ed25519'} & set(sys.modules); "
        "assert k.enable_fast_verify() and 'certd.signing.fixedkey._ed25519' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
