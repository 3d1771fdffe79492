"""The audit's fast parsers (canonical envelope slicing, orjson statements) agree with the
strict JSON parsers on every input: generated mutations of real envelopes and statements."""

from __future__ import annotations

import json
import random

import pytest

from certd.errors import SigningError
from certd.signing import dsse, intoto
from certd.signing.dsse import Envelope, sign_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, make_statement
from certd.signing.keys import SigningKey

_DIGEST = "ab" * 32


def _statement(extra: object) -> bytes:
    return make_statement([("task", _DIGEST)], "https://x.example/p", {"v": extra, "issued_at": 1})


def _strict_envelope(data: bytes) -> Envelope | str:
    try:
        obj = dsse._STRICT_JSON.decode(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, SigningError):
        return "error"
    try:
        return Envelope.from_json(json.dumps(obj, separators=(", ", ": ")).encode())
    except SigningError:
        return "error"


def _fast_envelope(data: bytes) -> Envelope | str:
    try:
        return Envelope.from_json(data)
    except SigningError:
        return "error"


def _mutations(data: bytes, rng: random.Random) -> list[bytes]:
    out = [data, data.replace(b'"', b'"', 1)]
    specials = [b'"', b"\\", b"-", b"_", b"=", b" ", b"\x00", b"\xff", b"A", b"}", b","]
    for _ in range(60):
        i = rng.randrange(len(data))
        out.append(data[:i] + rng.choice(specials) + data[i + 1 :])
        out.append(data[:i] + rng.choice(specials) + data[i:])
        out.append(data[:i] + data[i + 1 :])
    return out + _base64_mutations(data, rng)


_B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _base64_mutations(data: bytes, rng: random.Random) -> list[bytes]:
    """Each base64 string of ``data`` (the payload, every sig) with its last characters
    changed: other alphabet letters (non-zero unused bits: valid but not canonical, or
    another value), URL-safe letters, padding dropped, added or moved, a newline inside."""
    out = []
    strings = data.split(b'"')
    for k, text in enumerate(strings):
        if len(text) < 8 or k % 2 == 0 or text.strip(_B64 + b"=") or not text.endswith(b"="):
            continue
        end = len(text.rstrip(b"="))
        variants = [text[:end], text + b"=", text[:end] + b"=" * 3, text[:4] + b"\n" + text[4:]]
        variants += [
            text[: end - 1] + b"=" + text[end:],
            text.replace(b"+", b"-").replace(b"/", b"_"),
        ]
        for _ in range(12):
            i = end - 1 - rng.randrange(3)
            variants.append(text[:i] + bytes([rng.choice(_B64)]) + text[i + 1 :])
        for v in variants:
            out.append(b'"'.join([*strings[:k], v, *strings[k + 1 :]]))
    return out


# Three fresh seeds per run, drawn inside the test: the ids stay the same in every process
# (pytest-xdist's workers must collect the same tests); a failure names its seed.
@pytest.mark.parametrize("draw", range(3))
def test_envelope_fast_path_agrees_with_the_json_parser(draw: int) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    key = SigningKey.generate("certd.example/log")
    envs = [
        sign_envelope(_statement(rng.random()), IN_TOTO_PAYLOAD_TYPE, key).to_json(),
        sign_envelope(b"{}", 'odd"type\\', key).to_json(),
        sign_envelope(b"x", "t", [key, SigningKey.generate("certd.example/b")]).to_json(),
    ]
    for env in envs:
        for data in _mutations(env, rng):
            assert _fast_envelope(data) == _strict_envelope(data), (seed, data)


def _strict_statement(data: bytes) -> object:
    try:
        return intoto._STRICT_JSON.decode(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, SigningError):
        return "error"


def _fast_statement(data: bytes) -> object:
    try:
        return intoto.load_statement_json(data)
    except SigningError:
        return "error"


@pytest.mark.parametrize(
    "payload",
    [
        _statement(1),
        _statement(1.5e16),
        _statement(2**70),
        _statement('é\u2028\x1f\\"'),
        b'{"a":1,"a":1}',
        b'{"a":1,"b":{"c":2,"c":2}}',
        b'{"a":NaN}',
        b'{"a":"\\ud800"}',
        b'{"b":1,"a":2}',
        b'{"a":"\xff"}',
        b'{"a":1e400}',
        b'{"a":-0}',
    ],
)
def test_statement_fast_path_agrees_with_the_json_parser(payload: bytes) -> None:
    fast, strict = _fast_statement(payload), _strict_statement(payload)
    assert fast == strict or (fast != fast and strict != strict)  # NaN is not equal to itself
    assert type(fast) is type(strict)
