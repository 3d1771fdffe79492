"""The Ed25519 verification backends behind ``certd.signing.keys.VerifierKey.verify``.

``verify`` is libsodium's (PyNaCl, the server extra), or OpenSSL's (cryptography) without it.
``enable_fast_verify`` switches bulk verification (the audit and its workers) to a verifier
prepared once per public key, as strict as libsodium (``tests/unit/signing/
test_verify_backends.py`` and ``test_fixed_key_verify.py`` forge the bad signatures all must
refuse): the project's own fixed-key verifier (``fixedkey/_ed25519.c``, a C extension built with
the package), or else ed25519-dalek's ``verify_strict`` through solders; ``fast_for`` gives a
key's prepared verifier once it is on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = ["FastVerify", "enable_fast_verify", "fast_for", "verify"]


def verify_with_cryptography(
    key: Ed25519PublicKey, public: bytes, message: bytes, signature: bytes
) -> bool:
    try:
        key.verify(signature, message)
    except InvalidSignature:
        return False
    return True


def load_libsodium_verify() -> Callable[[Ed25519PublicKey, bytes, bytes, bytes], bool]:
    """libsodium's Ed25519 verification when PyNaCl is installed (about 2x faster here).

    libsodium is at least as strict as OpenSSL (it also rejects small-order keys), so a
    signature it accepts is one OpenSSL accepts; without PyNaCl, cryptography does the work.
    """
    try:
        from nacl.bindings import crypto_sign_open
        from nacl.exceptions import BadSignatureError
    except ImportError:
        return verify_with_cryptography

    def verify(key: Ed25519PublicKey, public: bytes, message: bytes, signature: bytes) -> bool:
        try:
            crypto_sign_open(signature + message, public)
        except BadSignatureError:
            return False
        return True

    return verify


verify = load_libsodium_verify()
"""``(key, public bytes, message, signature) -> ok``: libsodium, or OpenSSL without PyNaCl."""

_P25519 = 2**255 - 19
_L25519 = 2**252 + 27742317777372353535851937790883648493  # the prime order of the base point
FastVerify = Callable[[bytes, bytes], bool]
"""``(message, signature) -> ok`` for one public key."""


def load_dalek_verify() -> Callable[[bytes], FastVerify | None] | None:
    """ed25519-dalek's ``verify_strict`` (through solders' bindings) when it is installed.

    About 1.6x faster than libsodium here (``bench/bench_ed25519.py``), and as strict:
    ``s`` must be canonical, small-order ``A`` and ``R`` are refused, the equation is the
    cofactorless one and ``R`` is compared as bytes with the canonical encoding of the
    recomputed point, so a non-canonical or mixed-order ``R`` fails as in libsodium. The one
    check dalek leaves out, a canonical encoding of ``A`` (y < p), is made here once per key:
    a key without it gets no fast path (None) and libsodium keeps answering for it.
    """
    try:
        from solders.pubkey import Pubkey
        from solders.signature import Signature
    except ImportError:
        return None

    def for_key(public: bytes) -> FastVerify | None:
        if int.from_bytes(public, "little") & ((1 << 255) - 1) >= _P25519:
            return None
        pk = Pubkey(public)

        def verify(message: bytes, signature: bytes) -> bool:
            return bool(Signature(signature).verify(pk, message))

        return verify

    return for_key


def load_fixed_key_verify() -> Callable[[bytes], FastVerify | None] | None:
    """The fixed-key verifier (``certd/signing/fixedkey/_ed25519.c``) when the extension is built.

    A key is decoded once and a table of its multiples built once (``prepare``, about 1 ms),
    so a verify is about 128 table additions instead of about 253 doublings: about 2.5x
    faster than libsodium or ed25519-dalek here (``bench/bench_ed25519.py``). It accepts what
    libsodium accepts (the C file's header gives the rules); a key it does not take (not
    canonical, or not in the prime-order subgroup: no honest key) gets no fast path (None).
    A signature it refuses is verified again by libsodium, whose answer stands: the extension
    can only accept what its equation proves, never refuse what the library accepts.
    """
    try:
        from certd.signing.fixedkey import _ed25519
    except ImportError:
        return None

    def for_key(public: bytes) -> FastVerify | None:
        try:
            table = _ed25519.prepare(public)
        except ValueError:
            return None
        library_key = Ed25519PublicKey.from_public_bytes(public)

        def verify_fixed(message: bytes, signature: bytes) -> bool:
            r = signature[:32]
            h = int.from_bytes(hashlib.sha512(r + public + message).digest(), "little")
            if _ed25519.verify(table, r, signature[32:], (h % _L25519).to_bytes(32, "little")):
                return True
            return verify(library_key, public, message, signature)

        return verify_fixed

    return for_key


fast_verifier: Callable[[bytes], FastVerify | None] | None = None
"""Set by ``enable_fast_verify``: a verifier prepared for a public key, or None."""
_fast_by_key: dict[bytes, FastVerify | None] = {}


def enable_fast_verify() -> bool:
    """Verify through a prepared verifier from now on in this process: the fixed-key one when
    its extension is built, else ed25519-dalek when solders is installed.

    For bulk verification (the audit and its workers call it): preparing a key takes ~1 ms
    and importing solders ~0.2 s, more than a client verifying a few certificates would
    save, so nothing loads them on import. Idempotent.

    Returns:
        Whether the fast path is in use.
    """
    global fast_verifier
    if fast_verifier is None:
        fast_verifier = load_fixed_key_verify() or load_dalek_verify()
    return fast_verifier is not None


def fast_for(public: bytes) -> FastVerify | None:
    """The prepared verifier of ``public`` once ``enable_fast_verify`` succeeded, else None
    (also for a key the fast path would not check strictly: libsodium answers for it)."""
    if fast_verifier is None:
        return None
    try:
        return _fast_by_key[public]
    except KeyError:
        return _fast_by_key.setdefault(public, fast_verifier(public))
