"""The data codec of function tests: values cross the solution/test boundary as bytes.

Example:
    >>> from certd.domains.code._codec import decode, encode
    >>> decode(encode([1, (2.5, "x"), {"k": {b"v"}}, None, float("inf")]))
    [1, (2.5, 'x'), {'k': {b'v'}}, None, inf]
    >>> class A(int):
    ...     def __eq__(self, other): return True
    >>> type(decode(encode(A(0)))), decode(encode(A(0))) == 5
    (<class 'int'>, False)

What crosses: None, bool, int (at most ``MAX_INT_BYTES`` bytes), float (NaN and ±inf included),
str (lone surrogates included), bytes, and list, tuple, dict, set and frozenset of those, nested at
most ``MAX_DEPTH`` deep, in one frame of at most ``MAX_FRAME_BYTES``. Subclasses of those types
(``defaultdict``, ``Counter``, ``OrderedDict``, namedtuples, ``IntEnum``, ``numpy.float64``)
cross as their base type, read through the base type's own C methods, so an overridden
``__eq__``, ``__iter__`` or ``__str__`` never runs and never reaches the other side. Anything
else is refused with ``CodecError("an object of type X")``.

The decoder is the trusted side: it builds only plain builtin values from bytes and checks every
length, tag and limit, whatever the encoder (which runs next to the solution) did. This file is
standard library only: judge.py inlines it into the harness that runs inside the sandbox.
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = ["CodecError", "MAX_DEPTH", "MAX_FRAME_BYTES", "MAX_INT_BYTES", "decode", "encode"]

MAX_DEPTH = 100
MAX_INT_BYTES = 8192  # 65,536 bits: a bigger int is refused in both directions
MAX_FRAME_BYTES = 16 << 20
_LEN = struct.Struct(">I")
_FLOAT = struct.Struct(">d")
_SEQ: dict[type, bytes] = {list: b"l", tuple: b"t", set: b"S", frozenset: b"z"}
_SEQ_TYPE: dict[bytes, type] = {tag: kind for kind, tag in _SEQ.items()}


class CodecError(ValueError):
    """A value outside the codec, a limit exceeded, or malformed bytes."""


def _int_bytes(value: int) -> bytes:
    size = (value.bit_length() + 8) // 8
    if size > MAX_INT_BYTES:
        raise CodecError(f"an int larger than {MAX_INT_BYTES * 8} bits")
    return value.to_bytes(size, "big", signed=True)


def _base(value: object) -> tuple[type, Any]:
    """The builtin type a value crosses as and its plain form (containers: a list of items,
    dicts: a list of pairs), read through the base type's own methods; refuses other types."""
    kind = type(value)
    if kind is type(None) or kind is bool:
        return kind, value
    for scalar in (int, float, str):
        if isinstance(value, scalar):
            return scalar, scalar.__dict__[f"__{scalar.__name__}__"](value)
    if isinstance(value, bytes):
        return bytes, bytes(memoryview(value))
    if isinstance(value, dict):
        return dict, list(dict.items(value))
    for base in (list, tuple, set, frozenset):
        if isinstance(value, base):
            return base, list(base.__dict__["__iter__"](value))  # the base's, not an override
    raise CodecError(f"an object of type {kind.__name__}")


def _encode(value: object, out: list[bytes], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise CodecError(f"nested deeper than {MAX_DEPTH}")
    kind, plain = _base(value)
    if kind is type(None):
        out.append(b"N")
    elif kind is bool:
        out.append(b"T" if plain else b"F")
    elif kind is int:
        data = _int_bytes(plain)
        out += (b"i", _LEN.pack(len(data)), data)
    elif kind is float:
        out += (b"f", _FLOAT.pack(plain))
    elif kind is str:
        data = plain.encode("utf-8", "surrogatepass")
        out += (b"s", _LEN.pack(len(data)), data)
    elif kind is bytes:
        out += (b"b", _LEN.pack(len(plain)), plain)
    elif kind is dict:
        out += (b"d", _LEN.pack(len(plain)))
        for key, item in plain:
            _encode(key, out, depth + 1)
            _encode(item, out, depth + 1)
    else:
        out += (_SEQ[kind], _LEN.pack(len(plain)))
        for item in plain:
            _encode(item, out, depth + 1)


def encode(value: object) -> bytes:
    """Encode a value.

    Args:
        value: The value.

    Returns:
        Its bytes.

    Raises:
        CodecError: The value (or a part of it) is outside the codec, or over a limit.
    """
    out: list[bytes] = []
    try:
        _encode(value, out, 0)
    except RecursionError as exc:
        raise CodecError(f"nested deeper than {MAX_DEPTH}") from exc
    data = b"".join(out)
    if len(data) > MAX_FRAME_BYTES:
        raise CodecError(f"a value larger than {MAX_FRAME_BYTES} bytes")
    return data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CodecError("truncated value")
        chunk = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return chunk

    def length(self) -> int:
        (n,) = _LEN.unpack(self.take(4))
        if n > len(self.data) - self.pos:  # every element takes at least one byte
            raise CodecError("a length past the end of the value")
        return int(n)


def _decode(r: _Reader, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise CodecError(f"nested deeper than {MAX_DEPTH}")
    tag = r.take(1)
    if tag in (b"N", b"T", b"F"):
        return None if tag == b"N" else tag == b"T"
    if tag == b"i":
        n = r.length()
        if n > MAX_INT_BYTES:
            raise CodecError(f"an int larger than {MAX_INT_BYTES * 8} bits")
        return int.from_bytes(r.take(n), "big", signed=True)
    if tag == b"f":
        return float(_FLOAT.unpack(r.take(8))[0])
    if tag == b"s":
        try:
            return r.take(r.length()).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise CodecError("a str that is not UTF-8") from exc
    if tag == b"b":
        return r.take(r.length())
    if tag == b"d":
        n = r.length()
        pairs = [(_decode(r, depth + 1), _decode(r, depth + 1)) for _ in range(n)]
        try:
            return dict(pairs)
        except TypeError as exc:
            raise CodecError("an unhashable dict key") from exc
    kind = _SEQ_TYPE.get(tag)
    if kind is None:
        raise CodecError(f"an unknown tag {tag!r}")
    items = [_decode(r, depth + 1) for _ in range(r.length())]
    try:
        return kind(items)
    except TypeError as exc:
        raise CodecError("an unhashable set element") from exc


def decode(data: bytes) -> Any:
    """Decode bytes into plain builtin values.

    Args:
        data: What ``encode`` produced (or anything: the bytes are untrusted).

    Returns:
        The value, built only from None, bool, int, float, str, bytes, list, tuple, dict, set
        and frozenset.

    Raises:
        CodecError: Malformed bytes, trailing bytes or a limit exceeded.
    """
    if len(data) > MAX_FRAME_BYTES:
        raise CodecError(f"a value larger than {MAX_FRAME_BYTES} bytes")
    r = _Reader(data)
    value = _decode(r, 0)
    if r.pos != len(r.data):
        raise CodecError("trailing bytes after the value")
    return value
