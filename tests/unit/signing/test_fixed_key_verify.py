"""The fixed-key Ed25519 verifier (``certd/signing/fixedkey/_ed25519.c``) accepts exactly what
libsodium accepts, for every key it prepares.

The extension is called directly here, not through ``certd.signing.ed25519``'s wrapper, which
asks libsodium again about every refusal and would hide a wrong refusal. Each test draws fresh
keys, messages and mutations (a generator, not a list of cases); ``tests/ed25519_ref.py``
forges the signatures a lax verifier would take.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Iterator

import ed25519_ref
import pytest

from certd.signing import ed25519
from certd.signing.keys import SigningKey

fixed = pytest.importorskip("certd.signing.fixedkey._ed25519")
L = ed25519_ref.L


def fixed_accepts(table: bytes, public: bytes, message: bytes, signature: bytes) -> bool:
    r = signature[:32]
    h = int.from_bytes(hashlib.sha512(r + public + message).digest(), "little") % L
    return bool(fixed.verify(table, r, signature[32:], h.to_bytes(32, "little")))


def test_the_extension_is_built_and_the_audit_uses_it() -> None:
    """``make test`` builds the package with a compiler: a missing extension would silently
    leave the audit on the slower library path."""
    assert ed25519.load_fixed_key_verify() is not None
    assert ed25519.enable_fast_verify()
    verify = ed25519.fast_for(SigningKey.generate("test.example/fixed").public_key)
    assert verify is not None and "load_fixed_key_verify" in verify.__qualname__


def test_every_honest_signature_verifies() -> None:
    for _ in range(40):
        key = SigningKey.generate("test.example/fixed")
        table = fixed.prepare(key.public_key)
        for n in (0, 1, 31, 64, 200, 1500):
            message = os.urandom(n)
            assert fixed_accepts(table, key.public_key, message, key.sign(message))


def mutations(rng: random.Random, signature: bytes) -> Iterator[tuple[str, bytes]]:
    """Signatures near ``signature``: bits flipped in R and in s, s plus multiples of L, R's
    sign bit, R replaced by small-order and non-canonical encodings."""
    r, s = signature[:32], int.from_bytes(signature[32:], "little")
    for _ in range(6):
        flipped = bytearray(signature)
        flipped[rng.randrange(64)] ^= 1 << rng.randrange(8)
        yield "a bit flipped", bytes(flipped)
    for k in (1, 2, 15):
        if s + k * L < 2**256:
            yield f"s + {k}L", r + (s + k * L).to_bytes(32, "little")
    yield "s = L", r + L.to_bytes(32, "little")
    yield "s = L - 1", r + (L - 1).to_bytes(32, "little")
    yield "R's sign bit flipped", r[:31] + bytes([r[31] ^ 0x80]) + signature[32:]
    y_plus_p = int.from_bytes(r, "little") & ((1 << 255) - 1)
    if y_plus_p + ed25519_ref.P < 2**255:  # a non-canonical R (rare: y < 19)
        yield "R's y + p", (y_plus_p + ed25519_ref.P).to_bytes(32, "little") + signature[32:]
    for name, point in (("identity", ed25519_ref.IDENTITY), ("T8", ed25519_ref.T8)):
        yield f"R = {name}", ed25519_ref.encode(point) + signature[32:]
    yield "R = identity, y + p", (1 + ed25519_ref.P).to_bytes(32, "little") + signature[32:]


def test_mutated_signatures_get_libsodiums_answer() -> None:
    rng = random.Random(int.from_bytes(os.urandom(8), "little"))
    compared = 0
    for _ in range(25):
        key = SigningKey.generate("test.example/fixed")
        table = fixed.prepare(key.public_key)
        message = os.urandom(rng.randrange(300))
        for what, signature in mutations(rng, key.sign(message)):
            for m in (message, message + b"!"):
                want = ed25519_ref.sodium_accepts(key.public_key, m, signature)
                assert fixed_accepts(table, key.public_key, m, signature) == want, what
                compared += 1
    assert compared >= 25 * 2 * 14  # 14 to 16 mutations each, on two messages


def test_forged_signatures_are_refused_as_libsodium_refuses_them() -> None:
    """Every forgery of ``tests/ed25519_ref.py``, plus the one whose equation holds: R the
    identity with a zero nonce (s = k a, so [s]B - [k]A is the identity), which only the
    small-order rule on R refuses."""
    identity = ed25519_ref.encode(ed25519_ref.IDENTITY)
    for n in range(10):
        seed, message = os.urandom(32), os.urandom(n * 41)
        public = ed25519_ref.public_key(seed)
        zero_nonce = ed25519_ref.sign_with(seed, message, lambda p: identity, zero_nonce=True)
        s = int.from_bytes(zero_nonce[32:], "little")
        k = int.from_bytes(hashlib.sha512(identity + public + message).digest(), "little") % L
        minus_ka = ed25519_ref.mul(L - k, ed25519_ref.decode(public))
        equation = ed25519_ref.add(ed25519_ref.mul(s, ed25519_ref.B), minus_ka)
        assert ed25519_ref.encode(equation) == identity  # only the rule on R refuses it
        forged = [
            *ed25519_ref.bad_signatures(seed, message),
            ("R = identity, zero nonce", public, zero_nonce),
        ]
        for what, key, signature in forged:
            assert not ed25519_ref.sodium_accepts(key, message, signature), what
            try:
                table = fixed.prepare(key)
            except ValueError:
                continue  # no fast path for this key: libsodium answers for it
            assert not fixed_accepts(table, key, message, signature), what


def test_a_key_outside_the_prime_order_subgroup_or_not_canonical_gets_no_table() -> None:
    """Small-order keys, a mixed-order key (an honest key plus a point of order 8), y >= p
    and a y that is no point: ``prepare`` refuses them, so libsodium verifies for them."""
    honest = ed25519_ref.decode(ed25519_ref.public_key(os.urandom(32)))
    refused = [
        ed25519_ref.encode(ed25519_ref.IDENTITY),
        ed25519_ref.ORDER8_HEX_BYTES,
        ed25519_ref.encode(ed25519_ref.add(honest, ed25519_ref.T8)),
        (ed25519_ref.P + 1).to_bytes(32, "little"),
        (2**255 - 1).to_bytes(32, "little"),
    ]
    not_a_point = next(
        y.to_bytes(32, "little") for y in range(2, 100) if not _is_point(y.to_bytes(32, "little"))
    )
    for_key = ed25519.load_fixed_key_verify()
    assert for_key is not None
    for key in [*refused, not_a_point, b"short"]:
        with pytest.raises(ValueError):
            fixed.prepare(key)
        if len(key) == 32:
            assert for_key(key) is None


def _is_point(encoded: bytes) -> bool:
    try:
        ed25519_ref.decode(encoded)
    except ValueError:
        return False
    return True


def test_a_refusal_is_asked_again_of_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wrapper can only add acceptances the equation proves: with the extension refusing
    everything, honest signatures still verify (libsodium's answer) and bad ones still fail."""
    for_key = ed25519.load_fixed_key_verify()
    assert for_key is not None
    key = SigningKey.generate("test.example/fixed")
    verify = for_key(key.public_key)
    assert verify is not None
    monkeypatch.setattr(fixed, "verify", lambda *args: False)
    message = os.urandom(100)
    good = key.sign(message)
    assert verify(message, good)
    assert not verify(message + b"x", good)


def test_wrong_sizes_are_a_value_error() -> None:
    table = fixed.prepare(SigningKey.generate("test.example/fixed").public_key)
    with pytest.raises(ValueError):
        fixed.verify(table[:-1], bytes(32), bytes(32), bytes(32))
    with pytest.raises(ValueError):
        fixed.verify(table, bytes(31), bytes(32), bytes(32))
