"""The fast reader builds exactly what the grammar builds, or declines.

For every text the fast reader accepts, the grammar (``parse._latex``, the ANTLR path) must
parse it to an object of the same type, ``==`` to it and with the same ``srepr``. The texts:
the warm-up answers, the priming corpus, the trap suite, a seeded generated corpus of the
subset's shapes, and (when the sdist is at hand) every answer text of Math-Verify's public
cases. Coverage is asserted too, so the test cannot pass by declining everything.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest
import sympy

from certd.domains.math.errors import MathError
from certd.domains.math.extract import extract_answer
from certd.domains.math.fastlatex import read_fast
from certd.domains.math.parse import _COMPLEX, _latex, normalized
from certd.domains.math.warmup import WARM_ANSWERS, prime_corpus

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "conformance"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_math_traps import TRAPS

_ATOMS = [
    "7", "12", "0", "3.25", "0.5", "x", "y", "a", "n", "B", "x_1", "a_{n}", "y_{12}", r"\pi",
    r"\alpha", r"\Theta", "e", "e^{x}", "e^2", r"\infty", r"\sqrt{2}", r"\sqrt[3]{x}",
    r"\frac{1}{2}", r"\frac{x}{3}", r"\frac{\sqrt{3}}{2}", "2^{10}", "x^2", "x^{2/3}", "n!",
    r"\sin(x)", r"\cos^2(2x)", r"\tan^{-1}(y)", r"\ln(x+1)", r"\log_2 8", r"\sin x", r"\ln 2",
    r"\log(100)", r"\exp(x)", r"\arccos(a)", r"\sum_{k=1}^{n} k^2", r"\prod_{i=1}^{5} i",
    "F_{n-k-1}",
]  # fmt: skip
_BINARY = ["+", "-", r"\cdot", r"\times", "/", ":", " ", r"\div", "*"]
_CHAIN = ["<", r"\le"]
_RELATIONS = ["=", "<", ">", r"\le", r"\geq", r"\neq", "<=", ">=", r"\lt"]


def _expr(rng: random.Random, depth: int) -> str:
    if depth <= 0 or rng.random() < 0.3:
        return rng.choice(_ATOMS)
    shape = rng.randrange(8)
    a, b = _expr(rng, depth - 1), _expr(rng, depth - 1)
    if shape == 0:
        return f"{a} {rng.choice(_BINARY)} {b}"
    if shape == 1:
        return f"\\frac{{{a}}}{{{b}}}"
    if shape == 2:
        return f"\\sqrt{{{a}}}" if rng.random() < 0.5 else f"\\sqrt[{rng.randint(2, 4)}]{{{a}}}"
    if shape == 3:
        return f"({a})^{{{rng.choice(['2', '-1', 'n', b])}}}"
    if shape == 4:
        return f"-{a}"
    if shape == 5:
        return f"{rng.randint(1, 9)}({a})"
    if shape == 6:
        return f"{a}{b}"
    return f"({a} {rng.choice(_BINARY)} {b})"


def _top(rng: random.Random) -> str:
    e = lambda: _expr(rng, 2)  # noqa: E731
    shape = rng.randrange(9)
    if shape == 0:
        return f"{e()} {rng.choice(_RELATIONS)} {e()}"
    if shape == 1:
        return f"{e()} < {e()} {rng.choice(_CHAIN)} {e()}"
    if shape == 2:
        return ", ".join(e() for _ in range(rng.randint(2, 4)))
    if shape == 3:
        lo, hi = rng.choice("(["), rng.choice(")]")
        return f"{lo}{e()}, {e()}{hi}"
    if shape == 4:
        return r"\{" + ", ".join(e() for _ in range(rng.randint(1, 3))) + r"\}"
    if shape == 5:
        return rf"({e()}, {e()}) \cup [{rng.randint(0, 9)}, \infty)"
    if shape == 6:
        return f"{e()} \\pm {e()}" if rng.random() < 0.7 else f"\\pm {e()}"
    if shape == 7:
        rows = [" & ".join(e() for _ in range(2)) for _ in range(2)]
        return r"\begin{pmatrix}" + r" \\ ".join(rows) + r"\end{pmatrix}"
    return f"x = {e()}, y = {e()}"


def _generated(n: int = 500) -> list[str]:
    rng = random.Random(20261202)
    return [_top(rng) if i % 2 else _expr(rng, 3) for i in range(n)]


def _texts(raw: list[str]) -> list[str]:
    """The normalised texts the grammar would get (``parse._parse``'s step 2)."""
    out = []
    for t in raw:
        try:
            s, _ = normalized(t)
        except Exception:  # noqa: BLE001 - normalisation refusals are not this test's
            continue
        if s:
            out.append(s)
    return list(dict.fromkeys(out))


def _grammar(s: str) -> Any:
    try:
        return _latex(s)
    except Exception as e:  # noqa: BLE001 - any refusal is a mismatch when fast accepted
        return e


def _srepr(x: Any) -> str:
    try:
        return str(sympy.srepr(x))
    except TypeError:  # printing sorts factors; NaN (0/0 written out) cannot be sorted
        return repr(_tree(x))


def _tree(x: Any) -> Any:
    if getattr(x, "args", ()):
        return (type(x).__name__, tuple(_tree(a) for a in x.args))
    return (type(x).__name__, x._hashable_content())


def _check(texts: list[str]) -> tuple[int, list[str]]:
    accepted, wrong = 0, []
    for s in texts:
        fast = read_fast(s, is_real=not _COMPLEX.search(s))
        if fast is None:
            continue
        accepted += 1
        ref = _grammar(s)
        if (
            isinstance(ref, Exception)
            or type(ref) is not type(fast)
            or _srepr(ref) != _srepr(fast)
            or ref != fast
        ):
            wrong.append(f"{s!r}: fast {_srepr(fast)} vs grammar {ref!r}")
    return accepted, wrong


# Shapes read since the reader first shipped, with variants around each (the grammar decides
# every one of them here; the fast reader must build the same object or decline).
_SHAPES = [
    # the letter d (a differential only before a letter or a command)
    "d", "d+1", "2d", "d_1", "d^2", "x_d", "d = 5", "ad", "tx", "rt", r"\frac{d}{2}",
]  # fmt: skip


def test_identical_to_the_grammar_on_the_newer_shapes() -> None:
    accepted, wrong = _check(_SHAPES)
    assert not wrong, "\n".join(wrong[:20])
    assert accepted >= 0.8 * len(_SHAPES)


def _lexer_tokens(text: str) -> list[str]:
    from antlr4 import InputStream
    from latex2sympy2_extended.antlr_parser import PSLexer

    lexer = PSLexer(InputStream(text))
    lexer.removeErrorListeners()
    out = []
    while (token := lexer.nextToken()).type != -1:
        out.append(token.text)
    return out


def test_letter_runs_the_lexer_reads_as_one_token_are_declined() -> None:
    """``tr``, ``eye``, ``dx``…: the grammar's lexer takes the longest match, so a run of
    letters is not always a product of letters; whatever the reader accepts, it lexes as one
    letter per token."""
    from latex2sympy2_extended.antlr_parser import PSLexer

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    letters += [c.upper() for c in letters]
    words = [a + b for a in letters for b in letters]
    words += [a + b + c for a in letters[:26] for b in letters[:26] for c in letters[:26]]
    words += [n.strip("'") for n in PSLexer.literalNames if n.strip("'").isalpha()]
    for w in words:
        if read_fast(w, is_real=True) is not None:
            assert _lexer_tokens(w) == list(w), w


def test_identical_to_the_grammar_on_the_warm_up_traps_and_priming_corpus() -> None:
    raw = list(WARM_ANSWERS) + prime_corpus() + [t for pair in TRAPS for t in pair]
    texts = _texts(raw)
    accepted, wrong = _check(texts)
    assert not wrong, "\n".join(wrong[:20])
    assert accepted >= 0.25 * len(texts)  # the priming corpus covers the whole grammar


@pytest.mark.slow
def test_identical_to_the_grammar_on_a_generated_corpus() -> None:
    texts = _texts(_generated())
    accepted, wrong = _check(texts)
    assert not wrong, "\n".join(wrong[:20])
    assert accepted >= 0.6 * len(texts)


@pytest.mark.slow
def test_identical_to_the_grammar_on_math_verify_answers() -> None:
    mathverify_cases = pytest.importorskip("mathverify_cases")
    try:
        cases = mathverify_cases.load_cases()
    except RuntimeError as e:  # no sdist and no network
        pytest.skip(str(e))
    raw = []
    for c in cases:
        raw += [c.gold, c.pred]
        for t in (c.gold, c.pred):
            try:
                raw.append(extract_answer(t).text)
            except MathError:
                pass
    texts = _texts(raw)
    accepted, wrong = _check(texts)
    assert not wrong, "\n".join(wrong[:20])
    assert accepted >= 0.5 * len(texts)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = 3", sympy.Eq(sympy.Symbol("x", real=True), 3)),
        (r"2\frac{1}{2}", sympy.Rational(5, 2)),  # the grammar's mixed number
        ("1/2x", None),  # checked against the grammar above; here only that it reads
        (r"\pm 2", None),
    ],
)
def test_reads_common_shapes(text: str, expected: Any) -> None:
    got = read_fast(text, is_real=True)
    assert got is not None
    if expected is not None:
        assert got == expected


@pytest.mark.parametrize(
    "text",
    [
        "f(x)",  # a function application to the grammar
        r"\sum_{k}^{n} k",  # no k = a
        r"\int_0^1 x\,dx",
        r"\frac{d}{dx} x^2",
        r"x \approx 3",
        "a = 4, -8, -10",  # the grammar reads a = {4, -8, -10}
        "204_5",  # a base subscript the grammar drops
        "1,000",  # the grammar's comma number
        "1.5.2",
        "x^-1",
        "x^T",  # the lexer's transpose token
        "x^{T}",
        "tr",  # a bare-word token of the lexer (trace)
        "2 eye",
        "dx",  # a differential
        r"d \cdot 2",
        "2^3^2",
        r"\sin 2x",  # where its argument ends is the grammar's to say
        r"\sin(x, y)",
        "|x|",
        "1; 2",
        r"\begin{vmatrix}1 & 2\\3 & 4\end{vmatrix}",  # a determinant
        r"\begin{pmatrix}1\end{pmatrix} + \begin{pmatrix}2\end{pmatrix}",
        "3 + 4i",
        r"\frac{1}{",
        "",
    ],
)
def test_declines_what_it_does_not_read(text: str) -> None:
    assert read_fast(text, is_real=True) is None
