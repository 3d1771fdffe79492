"""Ed25519 keys named and identified as in the C2SP signed-note spec.

Example:
    >>> from certd.signing.keys import SigningKey, VerifierKey
    >>> key = SigningKey.generate("certd.example/log")
    >>> vkey = VerifierKey.from_vkey(key.verifier().to_vkey())
    >>> vkey.verify(b"hello", key.sign(b"hello"))
    >>> vkey.key_id_hex == key.key_id_hex
    True

A key id is ``SHA-256(name || 0x0A || type || public key)[:4]`` (c2sp.org/signed-note,
"Signatures"). Type ``0x01`` marks plain Ed25519 note signatures; type ``0x04`` marks
timestamped Ed25519 cosignatures (c2sp.org/tlog-cosignature), so one Ed25519 key has a
different id in each role. Text forms:

- verifier key (vkey): ``name+hex(key id)+base64(type || public key 32)``
- private key (golang.org/x/mod/sumdb/note):
  ``PRIVATE+KEY+name+hex(key id)+base64(0x01 || seed 32)``
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from certd.atomicfile import write_atomic
from certd.errors import SigningError
from certd.signing import ed25519
from certd.signing.ed25519 import enable_fast_verify

__all__ = [
    "SIG_TYPE_COSIGNATURE_V1",
    "SIG_TYPE_ED25519",
    "SigningKey",
    "VerifierKey",
    "compute_key_id",
    "enable_fast_verify",
    "load_signing_key",
    "read_verifier_key",
    "save_signing_key",
    "validate_key_name",
]

SIG_TYPE_ED25519 = 0x01
"""Signature type byte of Ed25519 note signatures (c2sp.org/signed-note)."""

SIG_TYPE_COSIGNATURE_V1 = 0x04
"""Signature type byte of timestamped Ed25519 cosignatures (c2sp.org/tlog-cosignature)."""

_SUPPORTED_TYPES = (SIG_TYPE_ED25519, SIG_TYPE_COSIGNATURE_V1)
_PRIVATE_PREFIX = "PRIVATE+KEY+"
_ED25519_KEY_BYTES = 32
_ED25519_SIG_BYTES = 64


def validate_key_name(name: str) -> None:
    """Check a key name against c2sp.org/signed-note.

    Args:
        name: the key name, e.g. ``certd.example/log``.

    Raises:
        SigningError: the name is empty, or holds whitespace, ``+`` or a control character.
    """
    if not name:
        raise SigningError("expected a non-empty key name, got ''")
    for ch in name:
        if ch.isspace() or ch == "+" or not ch.isprintable():
            raise SigningError(
                f"expected a key name without whitespace, '+' or control characters, got {name!r}"
            )


def compute_key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    """Compute a C2SP key id.

    Args:
        name: the key name.
        sig_type: the signature type byte (``SIG_TYPE_ED25519`` or ``SIG_TYPE_COSIGNATURE_V1``).
        public_key: the 32-byte Ed25519 public key.

    Returns:
        The first four bytes of ``SHA-256(name || 0x0A || sig_type || public_key)``.
    """
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([sig_type]) + public_key).digest()[
        :4
    ]


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise SigningError(f"expected standard base64 in {what}, got {text!r}") from e


def _check_key_id_hex(text: str, what: str) -> bytes:
    if len(text) != 8 or any(c not in "0123456789abcdef" for c in text):
        raise SigningError(f"expected 8 lowercase hex digits as key id in {what}, got {text!r}")
    return bytes.fromhex(text)


@dataclass(frozen=True)
class VerifierKey:
    """A trusted Ed25519 public key with its name and signature type.

    Attributes:
        name: the key name (c2sp.org/signed-note rules).
        public_key: the 32-byte Ed25519 public key.
        sig_type: ``SIG_TYPE_ED25519`` for note signatures, ``SIG_TYPE_COSIGNATURE_V1`` for a
            witness cosigner.
    """

    name: str
    public_key: bytes
    sig_type: int = SIG_TYPE_ED25519
    _key: Ed25519PublicKey = field(init=False, repr=False, compare=False)
    _key_id: bytes = field(init=False, repr=False, compare=False)

    def __reduce__(self) -> tuple[type[VerifierKey], tuple[str, bytes, int]]:
        """Pickle by value (the OpenSSL key object is rebuilt), for worker processes."""
        return (VerifierKey, (self.name, self.public_key, self.sig_type))

    def __post_init__(self) -> None:
        validate_key_name(self.name)
        if self.sig_type not in _SUPPORTED_TYPES:
            raise SigningError(f"expected signature type 0x01 or 0x04, got 0x{self.sig_type:02x}")
        if len(self.public_key) != _ED25519_KEY_BYTES:
            raise SigningError(
                f"expected a 32-byte Ed25519 public key, got {len(self.public_key)} bytes"
            )
        try:
            key = Ed25519PublicKey.from_public_bytes(self.public_key)
        except ValueError as e:
            raise SigningError(f"invalid Ed25519 public key for {self.name}") from e
        object.__setattr__(self, "_key", key)
        key_id = compute_key_id(self.name, self.sig_type, self.public_key)
        object.__setattr__(self, "_key_id", key_id)

    @classmethod
    def from_vkey(cls, vkey: str) -> VerifierKey:
        """Parse a verifier key string ``name+hex(key id)+base64(type || key)``.

        Args:
            vkey: the verifier key text.

        Raises:
            SigningError: the text is malformed, the type is unsupported, or the key id does
                not match the name and key.

        Returns:
            The verifier key.
        """
        parts = vkey.split("+", 2)
        if len(parts) != 3:
            raise SigningError(f"expected a vkey 'name+keyid+base64', got {vkey!r}")
        name, id_hex, b64 = parts
        validate_key_name(name)
        want_id = _check_key_id_hex(id_hex, "vkey")
        raw = _b64decode(b64, "vkey")
        if len(raw) != 1 + _ED25519_KEY_BYTES:
            raise SigningError(f"expected 33 bytes of vkey key material, got {len(raw)}")
        key = cls(name=name, public_key=raw[1:], sig_type=raw[0])
        if key.key_id != want_id:
            raise SigningError(f"expected key id {key.key_id_hex} for vkey {name}, got {id_hex}")
        return key

    def to_vkey(self) -> str:
        """Format this key as a verifier key string.

        Returns:
            ``name+hex(key id)+base64(type || public key)``.
        """
        b64 = base64.b64encode(bytes([self.sig_type]) + self.public_key).decode("ascii")
        return f"{self.name}+{self.key_id_hex}+{b64}"

    @property
    def key_id(self) -> bytes:
        """The 4-byte C2SP key id."""
        return self._key_id

    @property
    def key_id_hex(self) -> str:
        """The key id as 8 lowercase hex digits."""
        return self._key_id.hex()

    def verify(self, message: bytes, signature: bytes) -> None:
        """Verify a raw Ed25519 signature over ``message``.

        Args:
            message: the signed bytes.
            signature: the 64-byte Ed25519 signature.

        Raises:
            SigningError: the signature has the wrong length or does not verify.
        """
        if len(signature) != _ED25519_SIG_BYTES:
            raise SigningError(f"expected a 64-byte Ed25519 signature, got {len(signature)} bytes")
        fast = ed25519.fast_for(self.public_key)  # None unless enable_fast_verify()
        if fast is not None:
            ok = fast(message, signature)
        else:
            ok = ed25519.verify(self._key, self.public_key, message, signature)
        if not ok:
            raise SigningError(f"signature does not verify with key {self.name}+{self.key_id_hex}")


class SigningKey:
    """A named Ed25519 private key.

    The key signs note texts, DSSE envelopes and, in the cosigner role, checkpoints
    (``certd.signing.note.cosign``). ``repr`` never shows the private key.
    """

    __slots__ = ("_key_id", "_name", "_private", "_public")

    def __init__(self, name: str, seed: bytes) -> None:
        """Build a key from its name and 32-byte Ed25519 seed.

        Args:
            name: the key name (c2sp.org/signed-note rules).
            seed: the 32-byte RFC 8032 private key seed.

        Raises:
            SigningError: the name is invalid or the seed is not 32 bytes.
        """
        validate_key_name(name)
        if len(seed) != _ED25519_KEY_BYTES:
            raise SigningError(f"expected a 32-byte Ed25519 seed, got {len(seed)} bytes")
        self._name = name
        self._private = Ed25519PrivateKey.from_private_bytes(seed)
        self._public = self._private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self._key_id = compute_key_id(name, SIG_TYPE_ED25519, self._public)

    @classmethod
    def generate(cls, name: str) -> SigningKey:
        """Generate a fresh key.

        Args:
            name: the key name.

        Raises:
            SigningError: the name is invalid.

        Returns:
            A new signing key.
        """
        return cls(name, secrets.token_bytes(_ED25519_KEY_BYTES))

    @classmethod
    def from_private_string(cls, text: str) -> SigningKey:
        """Parse ``PRIVATE+KEY+name+hex(key id)+base64(0x01 || seed)``.

        Args:
            text: the private key string (surrounding whitespace is ignored).

        Raises:
            SigningError: the text is malformed or its key id does not match.

        Returns:
            The signing key.
        """
        text = text.strip()
        if not text.startswith(_PRIVATE_PREFIX):
            raise SigningError("expected a private key starting with 'PRIVATE+KEY+'")
        parts = text[len(_PRIVATE_PREFIX) :].split("+", 2)
        if len(parts) != 3:
            raise SigningError("expected a private key 'PRIVATE+KEY+name+keyid+base64'")
        name, id_hex, b64 = parts
        want_id = _check_key_id_hex(id_hex, "private key")
        raw = _b64decode(b64, "private key")
        if len(raw) != 1 + _ED25519_KEY_BYTES or raw[0] != SIG_TYPE_ED25519:
            raise SigningError("expected 0x01 followed by a 32-byte seed in the private key")
        key = cls(name, raw[1:])
        if key.key_id != want_id:
            raise SigningError(
                f"expected key id {key.key_id_hex} for private key {name}, got {id_hex}"
            )
        return key

    def to_private_string(self) -> str:
        """Format the key in the golang sumdb private key format.

        Returns:
            ``PRIVATE+KEY+name+hex(key id)+base64(0x01 || seed)``.
        """
        seed = self._private.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        b64 = base64.b64encode(bytes([SIG_TYPE_ED25519]) + seed).decode("ascii")
        return f"{_PRIVATE_PREFIX}{self._name}+{self.key_id_hex}+{b64}"

    def __repr__(self) -> str:
        return f"SigningKey(name={self._name!r}, key_id={self.key_id_hex!r})"

    @property
    def name(self) -> str:
        """The key name."""
        return self._name

    @property
    def public_key(self) -> bytes:
        """The 32-byte Ed25519 public key."""
        return self._public

    @property
    def key_id(self) -> bytes:
        """The 4-byte key id of the note-signature (0x01) role."""
        return self._key_id

    @property
    def key_id_hex(self) -> str:
        """The note-signature key id as 8 lowercase hex digits."""
        return self._key_id.hex()

    def verifier(self) -> VerifierKey:
        """Return the matching note-signature verifier key (type 0x01).

        Returns:
            The verifier key.
        """
        return VerifierKey(self._name, self._public, SIG_TYPE_ED25519)

    def cosigner_verifier(self) -> VerifierKey:
        """Return the verifier key of this key in the cosigner role (type 0x04).

        Returns:
            The verifier key whose key id uses signature type 0x04.
        """
        return VerifierKey(self._name, self._public, SIG_TYPE_COSIGNATURE_V1)

    def sign(self, message: bytes) -> bytes:
        """Sign ``message`` with Ed25519.

        Args:
            message: the bytes to sign.

        Returns:
            The 64-byte signature.
        """
        return self._private.sign(message)


def save_signing_key(path: Path, key: SigningKey) -> None:
    """Write a private key file atomically with mode 0600.

    The key is written to a temporary file in the same directory, flushed to disk and
    renamed over ``path``, so a reader sees the old file or the new one, never a part.

    Args:
        path: where to write the key.
        key: the key to save.

    Raises:
        SigningError: the file cannot be written.
    """
    path = Path(path)
    data = (key.to_private_string() + "\n").encode("ascii")
    try:
        write_atomic(path, data, mode=0o600)
    except OSError as e:
        raise SigningError(f"cannot write key file {path}: {e.strerror}") from e


def load_signing_key(path: Path) -> SigningKey:
    """Read a private key file written by ``save_signing_key``.

    Args:
        path: the key file.

    Raises:
        SigningError: the file cannot be read or does not hold a valid private key.

    Returns:
        The signing key.
    """
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as e:
        raise SigningError(f"cannot read key file {path}") from e
    return SigningKey.from_private_string(text)


def read_verifier_key(source: str | Path) -> VerifierKey:
    """A verifier key from a file holding a vkey, or from the vkey text itself (``--trust``).

    Example:
        >>> key = SigningKey.generate("certd.example/log")
        >>> read_verifier_key(key.verifier().to_vkey()).key_id_hex == key.key_id_hex
        True
        >>> read_verifier_key("no/such/signing.pub")
        Traceback (most recent call last):
        certd.errors.SigningError: no/such/signing.pub: no such file (and not a vkey)

    Raises:
        SigningError: one line saying what is wrong: no such file, a private key given where
            the public one belongs, or text that is not a vkey.
    """
    path = Path(source)
    is_file = path.is_file()
    try:
        text = path.read_text(encoding="utf-8").strip() if is_file else str(source).strip()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise SigningError(f"{source}: cannot read: {reason}") from e
    where = f"{source}: " if is_file else ""
    if text.startswith(_PRIVATE_PREFIX):
        raise SigningError(
            f"{where or 'this '}is a private signing key; trust its public key instead "
            "(signing.pub in the data dir, or `certd keygen`'s vkey)"
        )
    if not is_file and text.count("+") < 2:
        raise SigningError(f"{source}: no such file (and not a vkey)")
    try:
        return VerifierKey.from_vkey(text)
    except SigningError as e:
        raise SigningError(f"{where}not a verifier key (name+keyid+base64): {e}") from e
