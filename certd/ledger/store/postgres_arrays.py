"""Array parameters for the PostgreSQL ledger, encoded in PostgreSQL's binary array format.

Example::

    from certd.ledger.store.postgres_arrays import bytea_array, int8_array
    cur.execute("SELECT %b::bytea[], %b::bigint[]", (bytea_array([b"a"]), int8_array([7])))

psycopg adapts a Python list element by element in Python (``psycopg.types.array``): for an
append of a few hundred entries, keys and nodes that was most of what the PostgreSQL path
cost certd beyond the SQLite one. These helpers build the whole one-dimensional array with
``struct`` in one pass (the layout ``array_recv`` reads: dimensions, element type, then each
element as a length and its binary value) and pass it as one binary parameter of the array
type, so the server parses it in C. Every value sent is a list of ``bytes``, ``str`` or
``int`` the store built; none is NULL.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from psycopg import adapters
from psycopg.adapt import Buffer, Dumper
from psycopg.pq import Format

__all__ = ["bytea_array", "int4_array", "int8_array", "text_array"]

_HEADER = struct.Struct("!iiIii")  # ndim = 1, has nulls = 0, element oid, length, lower bound
_EMPTY = struct.Struct("!iiI")  # ndim = 0, has nulls = 0, element oid
_LEN = struct.Struct("!i")
_INT8 = struct.Struct("!iq")  # element length 8, value
_INT4 = struct.Struct("!ii")  # element length 4, value

# (element oid, array oid) of the types the ledger sends
_TEXT, _BYTEA, _INT8_OID, _INT4_OID = (25, 1009), (17, 1001), (20, 1016), (23, 1007)


class _Array(bytes):
    """An encoded binary array; subclasses name its type."""

    oids: tuple[int, int]


class _TextArray(_Array):
    oids = _TEXT


class _ByteaArray(_Array):
    oids = _BYTEA


class _Int8Array(_Array):
    oids = _INT8_OID


class _Int4Array(_Array):
    oids = _INT4_OID


def _frame(oids: tuple[int, int], count: int, body: bytes) -> bytes:
    if not count:
        return _EMPTY.pack(0, 0, oids[0])
    return _HEADER.pack(1, 0, oids[0], count, 1) + body


def text_array(items: Sequence[str]) -> _TextArray:
    """A ``text[]`` parameter of ``items`` (UTF-8; PostgreSQL text holds no NUL)."""
    encoded = [s.encode() for s in items]
    body = b"".join(_LEN.pack(len(b)) + b for b in encoded)
    return _TextArray(_frame(_TEXT, len(items), body))


def bytea_array(items: Sequence[bytes]) -> _ByteaArray:
    """A ``bytea[]`` parameter of ``items``."""
    body = b"".join(_LEN.pack(len(b)) + b for b in items)
    return _ByteaArray(_frame(_BYTEA, len(items), body))


def int8_array(items: Sequence[int]) -> _Int8Array:
    """A ``bigint[]`` parameter of ``items``."""
    body = b"".join([_INT8.pack(8, v) for v in items])
    return _Int8Array(_frame(_INT8_OID, len(items), body))


def int4_array(items: Sequence[int]) -> _Int4Array:
    """An ``integer[]`` parameter of ``items``."""
    body = b"".join([_INT4.pack(4, v) for v in items])
    return _Int4Array(_frame(_INT4_OID, len(items), body))


def _dumper(kind: type[_Array]) -> type[Dumper]:
    class _ArrayDumper(Dumper):
        format = Format.BINARY
        oid = kind.oids[1]

        def dump(self, obj: object) -> Buffer:
            assert isinstance(obj, kind)
            return obj

    return _ArrayDumper


for _kind in (_TextArray, _ByteaArray, _Int8Array, _Int4Array):
    adapters.register_dumper(_kind, _dumper(_kind))  # global: connections made later copy it
