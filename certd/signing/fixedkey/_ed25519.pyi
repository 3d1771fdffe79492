"""Strict Ed25519 verification under one public key (``_ed25519.c``)."""

def prepare(public_key: bytes, /) -> bytes:
    """The key's table for ``verify``; ValueError for a key that is not canonical, not a point
    or not in the prime-order subgroup."""

def verify(table: bytes, r: bytes, s: bytes, h: bytes, /) -> bool:
    """Whether ``r`` encodes [s]B - [h]A (s < L, R not the identity); h = SHA-512(R || A || M)
    mod L, 32 bytes little-endian."""
