"""The function-test data codec: what crosses, as what, and what the decoder refuses."""

from __future__ import annotations

import enum
import math
import random
from collections import Counter, OrderedDict, defaultdict, namedtuple

import pytest

from certd.domains.code._codec import (
    MAX_DEPTH,
    MAX_INT_BYTES,
    CodecError,
    decode,
    encode,
)

_PLAIN = (type(None), bool, int, float, str, bytes, list, tuple, dict, set, frozenset)


def _only_plain(value: object) -> bool:
    if type(value) not in _PLAIN:
        return False
    if isinstance(value, dict):
        return all(_only_plain(k) and _only_plain(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return all(_only_plain(v) for v in value)
    return True


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**4000,
        -(2**4000),
        1.5,
        -0.0,
        math.inf,
        -math.inf,
        "",
        "héllo \udc80",
        b"\x00\xff",
        [1, [2, [3]]],
        (1, "a", (None,)),
        {"a": {1: [2.5]}, (1, 2): frozenset({3})},
        {1, "x", (2, 3)},
        frozenset({b"z"}),
        [True, 1, 1.0],
    ],
)
def test_values_round_trip_exactly(value: object) -> None:
    back = decode(encode(value))
    assert back == value and type(back) is type(value)
    assert repr(back) == repr(value)  # bool stays bool, -0.0 stays -0.0, order stays


def test_nan_crosses_as_nan() -> None:
    assert math.isnan(decode(encode(float("nan"))))


class _Colour(enum.IntEnum):
    RED = 3


class _AlwaysEqualInt(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


class _LyingList(list[int]):
    def __eq__(self, other: object) -> bool:
        return True

    def __iter__(self):  # type: ignore[no-untyped-def]  # a lying override
        return iter([1, 2, 3])


class _LyingStr(str):
    def __str__(self) -> str:
        return "lie"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (defaultdict(int, {"a": 1}), {"a": 1}),
        (Counter("aab"), {"a": 2, "b": 1}),
        (OrderedDict(b=1, a=2), {"b": 1, "a": 2}),
        (namedtuple("P", "x y")(1, 2), (1, 2)),
        (_Colour.RED, 3),
        (_AlwaysEqualInt(0), 0),
        (_LyingList([9]), [9]),
        (_LyingStr("truth"), "truth"),
    ],
)
def test_builtin_subclasses_cross_as_their_base_type(value: object, expected: object) -> None:
    back = decode(encode(value))
    assert type(back) is type(expected) and back == expected and _only_plain(back)
    assert back != 5  # the always-equal override did not cross


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (object(), "object"),
        (bytearray(b"x"), "bytearray"),
        (lambda: 0, "function"),
        (iter([1]), "list_iterator"),
        (range(3), "range"),
        ([1, {2: object()}], "object"),
        (complex(1, 2), "complex"),
    ],
)
def test_other_types_are_refused_by_name(value: object, name: str) -> None:
    with pytest.raises(CodecError, match=f"an object of type {name}$"):
        encode(value)


def test_limits_refuse_big_ints_deep_nesting_and_cycles() -> None:
    with pytest.raises(CodecError, match="larger than"):
        encode(2 ** (MAX_INT_BYTES * 8))
    deep: list[object] = []
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(CodecError, match="deeper"):
        encode(deep)
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(CodecError, match="deeper"):
        encode(cycle)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"?",
        b"NN",
        b"i\x00\x00\x00\x05ab",
        b"l\xff\xff\xff\xff",
        b"s\x00\x00\x00\x01\xff",
        b"S\x00\x00\x00\x01l\x00\x00\x00\x00",
        b"d\x00\x00\x00\x01l\x00\x00\x00\x00N",
        b"f\x00",
        b"l\x00\x00\x00\x01" * (MAX_DEPTH + 2) + b"N",
    ],
)
def test_the_decoder_refuses_malformed_bytes(data: bytes) -> None:
    with pytest.raises(CodecError):
        decode(data)


def test_random_bytes_decode_to_plain_values_or_a_codec_error() -> None:
    rng = random.Random(36)
    seeds = [encode([1, "a", {2: (3.0, b"x")}, {4}, frozenset({5}), None, True])]
    for _ in range(3000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            value = decode(bytes(data[: rng.randint(0, len(data))]))
        except CodecError:
            continue
        assert _only_plain(value)
