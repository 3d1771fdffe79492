"""``canonical_json``'s reused C encoder writes what ``json.dumps`` with the canonical
settings writes, and refuses what it refuses, as ``InvalidInputError``."""

from __future__ import annotations

import json

import pytest

from certd.errors import InvalidInputError
from certd.signing.dsse import KeyRing
from certd.signing.intoto import canonical_json
from certd.signing.keys import SigningKey


def _reference(obj: object) -> bytes:
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


@pytest.mark.parametrize(
    "obj",
    [
        {"b": [1, 2.5, 1e16, 1e-7, -0.0, True, None], "a": {"z": 1, "y": [{}]}},
        {"s": '\u2028\x01\x7f é"\\\n\t', "n": 10**30, "f": False},
        "a string",
        3,
        1.5,
        [],
        {},
    ],
)
def test_matches_json_dumps(obj: object) -> None:
    assert canonical_json(obj) == _reference(obj)


def test_refuses_what_json_dumps_refuses() -> None:
    cycle: dict[str, object] = {}
    cycle["self"] = cycle
    for bad in ({"x": float("nan")}, {"x": object()}, {1: 2, "a": 1}, cycle):
        with pytest.raises(InvalidInputError):
            canonical_json(bad)


def test_encoder_reused_after_an_error() -> None:
    with pytest.raises(InvalidInputError):
        canonical_json({"a": [1, {"b": object()}]})
    assert canonical_json({"a": [1, {"b": 2}]}) == b'{"a":[1,{"b":2}]}'


def test_keyring_knows_any_window() -> None:
    key = SigningKey.generate("certd.example/log").verifier()
    ring = KeyRing([key])
    assert ring.knows(key.key_id_hex)
    assert not ring.knows("00000000")
    assert ring.knows(key.key_id_hex) == bool(ring.lookup(key.key_id_hex))
