"""A slow pure-Python Ed25519 (RFC 8032 arithmetic) to forge the signatures a strict verifier
must refuse: non-canonical ``s``, small-order and mixed-order ``R``, small-order keys.

Example:
    >>> import os
    >>> seed = os.urandom(32)
    >>> sig = sign_with(seed, b"m")
    >>> len(sig), len(public_key(seed))
    (64, 32)

Only tests use it (``tests/unit/signing/test_verify_backends.py``,
``test_fixed_key_verify.py``), with ``sodium_accepts`` as the oracle a strict verifier must
agree with; nothing here is constant time.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, P - 2, P) % P
_SQRT_M1 = pow(2, (P - 1) // 4, P)

Point = tuple[int, int, int, int]  # extended coordinates (X, Y, Z, T)
IDENTITY: Point = (0, 1, 1, 0)

# A point of order 8 (libsodium's blocklist of small-order encodings has it).
ORDER8_HEX = "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"


def add(p: Point, q: Point) -> Point:
    a = (p[1] - p[0]) * (q[1] - q[0]) % P
    b = (p[1] + p[0]) * (q[1] + q[0]) % P
    c = 2 * p[3] * q[3] * D % P
    d = 2 * p[2] * q[2] % P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def mul(s: int, p: Point) -> Point:
    q = IDENTITY
    while s > 0:
        if s & 1:
            q = add(q, p)
        p = add(p, p)
        s >>= 1
    return q


def encode(p: Point) -> bytes:
    zinv = pow(p[2], P - 2, P)
    x, y = p[0] * zinv % P, p[1] * zinv % P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def decode(b: bytes) -> Point:
    y = int.from_bytes(b, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P:
        x = x * _SQRT_M1 % P
    if (x * x - x2) % P:
        raise ValueError("not a point")
    if (x & 1) != sign:
        x = P - x
    y %= P
    return (x, y, 1, x * y % P)


_GY = 4 * pow(5, P - 2, P) % P
B = decode(int.to_bytes(_GY, 32, "little"))
T8 = decode(bytes.fromhex(ORDER8_HEX))


def _h(*parts: bytes) -> int:
    return int.from_bytes(hashlib.sha512(b"".join(parts)).digest(), "little")


def _secret(seed: bytes) -> tuple[int, bytes]:
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def public_key(seed: bytes) -> bytes:
    return encode(mul(_secret(seed)[0], B))


def sign_with(
    seed: bytes, msg: bytes, r_point: Callable[[Point], bytes] = encode, *, zero_nonce: bool = False
) -> bytes:
    """An Ed25519 signature whose ``R`` is ``r_point`` of the nonce point; ``s`` is computed
    over that ``R`` so that only the choice of ``R`` (and, with ``zero_nonce``, a nonce of 0,
    i.e. ``s = k * a``) departs from RFC 8032."""
    a, prefix = _secret(seed)
    pub = encode(mul(a, B))
    r = 0 if zero_nonce else _h(prefix, msg) % L
    big_r = r_point(mul(r, B))
    k = _h(big_r, pub, msg) % L
    return big_r + int.to_bytes((r + k * a) % L, 32, "little")


def bad_signatures(seed: bytes, msg: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """``(what, public key, signature)`` that RFC 8032 with libsodium's checks refuses, though
    a lax (cofactored, ZIP 215, or s-reducing) verifier accepts several."""
    pub = public_key(seed)
    good = sign_with(seed, msg)
    s = int.from_bytes(good[32:], "little")
    yield "s + L (non-canonical s)", pub, good[:32] + int.to_bytes(s + L, 32, "little")
    yield "R + T8 (mixed-order R)", pub, sign_with(seed, msg, lambda p: encode(add(p, T8)))
    yield (
        "R = T8 (small-order R)",
        pub,
        sign_with(seed, msg, lambda p: ORDER8_HEX_BYTES, zero_nonce=True),
    )
    noncanon_identity = int.to_bytes(1 + P, 32, "little")
    yield (
        "R = identity, y + p (non-canonical R)",
        pub,
        sign_with(seed, msg, lambda p: noncanon_identity, zero_nonce=True),
    )
    identity = encode(IDENTITY)
    yield "A = identity, R = identity, s = 0", identity, identity + bytes(32)
    yield "A = T8, R = identity, s = 0", ORDER8_HEX_BYTES, identity + bytes(32)
    flip = bytearray(good)
    flip[os.urandom(1)[0] % 64] ^= 1 << (os.urandom(1)[0] % 8)
    yield "one bit flipped", pub, bytes(flip)


ORDER8_HEX_BYTES = bytes.fromhex(ORDER8_HEX)


def sodium_accepts(public: bytes, message: bytes, signature: bytes) -> bool:
    """libsodium's answer (PyNaCl), for any 32 bytes as key: the strict rule under test."""
    from nacl.bindings import crypto_sign_open
    from nacl.exceptions import BadSignatureError

    try:
        crypto_sign_open(signature + message, public)
    except BadSignatureError:
        return False
    return True
