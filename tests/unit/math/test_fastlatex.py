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
from collections.abc import Callable
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
_APPROX = r"\approx"


_NEWER_ATOMS = [
    *_ATOMS, "f(x)", "g(2)", "f^2(x)", r"h(\pi)", "f(x_1)", "|x|", "|x-1|", "|2a|",
    r"|\frac{1}{2}|", "204_5", "12_{3}", "d", "P(A)", "x(x+1)", "f(-1)", r"\sin x \cos x",
    r"\sin^2 x",
]  # fmt: skip


def _expr(rng: random.Random, depth: int, atoms: list[str] = _ATOMS) -> str:
    if depth <= 0 or rng.random() < 0.3:
        return rng.choice(atoms)
    shape = rng.randrange(9 if atoms is _NEWER_ATOMS else 8)
    a, b = _expr(rng, depth - 1, atoms), _expr(rng, depth - 1, atoms)
    if shape == 8:
        return f"|{a}|" if rng.random() < 0.5 else f"|{a}| {rng.choice(['+', '-', ''])} |{b}|"
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


def _generated_newer(n: int = 400) -> list[str]:
    """Calls, ``|…|``, number subscripts and ``\\approx`` mixed into the generated shapes."""
    rng = random.Random(20261203)
    out = []
    for i in range(n):
        a, b = _expr(rng, 2, _NEWER_ATOMS), _expr(rng, 2, _NEWER_ATOMS)
        shape = i % 5
        if shape == 4:
            name = rng.choice(["x", "n", "(p, q)", "x_1", "D", r"\alpha", "y^2", "f(x)", "2x"])
            values = [_top(rng) if rng.random() < 0.3 else a, b][: rng.randint(1, 2)]
            out.append(f"{name} = {', '.join(values)}")
        elif shape == 0:
            out.append(a)
        elif shape == 1:
            out.append(f"{a} {rng.choice([*_RELATIONS, _APPROX])} {b}")
        elif shape == 2:
            out.append(f"{rng.choice(['x', 'ab', '2x', 'f(x)'])} \\approx {a}")
        else:
            out.append(f"{a} {rng.choice(_BINARY)} {b}")
    return out


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
    "d", "d+1", "2d", "d_1", "d^2", "x_d", "a_{e}", "d = 5", "ad", "tx", "rt", r"\frac{d}{2}",
    # a name applied to one atom is a function call; to anything else, a product
    "f(x)", "f(2)", "f(y) = y", "f(2) < f(1) < f(4)", "0<f(x)<1", "f(x)=1", "f(y)", "x(x+1)",
    "a(b)", "f(x)^2", "f^2(x)", "F(x)", "g(x+1)", "2f(x)", "f(x)g(x)", "f (x)", "f(x)!",
    "x^2(3)", "x^2(x+1)", "x^{2}(x+1)", "f(e)", "f(x^2)", "f(x_1)", "f(-1)", r"f(\pi)",
    r"f(\infty)", "ab(c)", "xf(x)", "f(2.5)", "f(x)+1", "f(x)(x+1)", "2x(3)", "P(A)",
    "f(x)/2", r"\frac{f(x)}{2}", "f^{-1}(x)", "f(x)^{2}", r"f(\alpha)", "f(2)-f(1)",
    "g(f(x))", "f(d)", "f(x_{12})", "f(x^{2})", "f(2^3)", "f(204_5)", "2^x(3)",
    r"\sum_{k=1}^{n} f(k)", r"\pi(x+1)", "a_1(x+1)", "f(x) = x^2 + 1", "f(10) = 3",
    # |…|: absolute values, where no bar could be read otherwise
    "|x|", "|AB|=1", "2|x|", "|x|y", "|x|^2", "|x|^{2}", "|x|+|y|", "|x|-|y|", "|x-1|",
    "-|x|", "|-3|", r"1\leq|z|\leq \frac{3}{2}", "|x|!", "a|b|", "|x|+|y|+|z|",
    r"|x|\cdot|y|", r"\frac{|x|}{2}", r"|\frac{1}{2}|", "(|x|+1)", "|x|, |y|", "|x| = 3",
    r"|\sin x|", "|x|^2 + |y|^2 = 1", "|x|^2|y|", "|x|^2-b|c|", "|a|^x|b|", "|2x - 1| < 3",
    # \approx: the converter keeps the right side after a name, the left side otherwise
    r"x\approx11", r"x=1/3\approx1.3", r"x = 5+5+1 = 1/3 \approx 11", r"2x \approx 3",
    r"x \approx 3 = 4", r"x^2 \approx 3", r"\frac{1}{2} \approx 0.5", r"ab \approx 3",
    r"x \approx 2, y \approx 3", r"x_1 \approx 2", r"-x \approx 2", r"\pi \approx 3.14",
    r"x = y \approx 2", r"\frac{1}{x} \approx 2", r"f(x) \approx 2", r"x \approx 2 < 3",
    # a number's subscript (a base) is dropped
    "204_5", "204_{5}", "204_{10}", "12_x", "1112112_3", "1112112_3 + 1", "3.5_2", "12_5 - 1",
    # a bare function argument ends at the next function
    r"2 \sin b \cos a", r"\sin b \cos a", r"\sin x \sqrt{2}", r"\sin x \ln y",
    r"\sin x \cos^2 x", r"\sin x \cos(x)", r"\sin^2 x \cos x", r"\log_2 8 \ln 3",
    # the grammar's hyperbolic functions, built as the trigonometric ones
    r"\tanh(x^{2}+143)", r"\tanh x", r"\sinh^{2} x", r"\cosh^{-1}(x)", r"\tanh^{-1} x",
    r"2\sinh b\cosh a", r"\tanh x \sqrt{2}", r"3x-3-1+\tanh(x^{2}+143)", r"\cosh^2(x)",
    r"9x\cdot\tanh(x^{2}+143)", r"\sinh(x)\cosh(x)", r"\tanh|x|", r"\sinh 2", r"\cosh\pi",
    r"\sech x", r"\coth x", r"\csch x", r"\tanh", r"\sinh^{3}(2x) = 1", r"x = \tanh 1, 2",
    # \lfloor…\rfloor and \lceil…\rceil: an expression between the two, as in parentheses
    r"\lfloor x-30\rfloor", r"\lceil x-30\rceil-1", r"\lfloor\frac{x}{3}\rfloor", r"\lceil x\rceil",
    r"5x-1+\lfloor\frac{1}{1+(x+13)^{2}}\rfloor", r"x+\lfloor x\rfloor-\lceil x\rceil+1",
    r"-\lfloor -x\rfloor", r"2\lfloor x\rfloor", r"\lfloor x\rfloor^{2}", r"\lfloor x\rfloor!",
    r"\lfloor x\rfloor(x+1)", r"f\lfloor x\rfloor", r"\lfloor \lceil x\rceil\rfloor",
    r"|\lfloor x\rfloor|", r"\lfloor |x|\rfloor", r"\lfloor x\rfloor, \lceil y\rceil",
    r"(\lfloor x\rfloor, 2]", r"\lceil 3\rceil", r"\{\lfloor x\rfloor\}", r"\sin(\lfloor x\rfloor)",
    r"\lfloor 2.5\rfloor", r"e^{\lfloor x\rfloor}", r"x = \lfloor y\rfloor, 2",
    r"3 \div \lceil x\rceil", r"f(\lfloor x\rfloor)", r"\lfloor x, y\rfloor",
    r"\lfloor x = 1\rfloor", r"\sin\lfloor x\rfloor", r"\lfloor x\rceil", r"\lfloor x", r"x\rfloor",
    r"\lfloor 204_5\rfloor", r"\lfloor x\rfloor_2", r"\lfloor\rfloor", r"\lceil x\rceil^{T}",
    # names = values: one relation to the values (a set when there are several)
    "n=1, 2, 3", "n=2, 3, 4", r"x = 1 \pm 2", r"x = \pm 2", r"x = 1, 2 \pm 3", "(p,q)=(3,2)",
    "(p,q,r)=(3,2,7)", "D = (0, 1)", "D = (0, 1.5)", "x = [0, 1]", "x = (1)", "(x) = 1",
    "(x, y) = (5, 8)  ,  (8, 5)", "x^2 = 1, 2", "x_1 = 1, 2", r"\alpha = 1, 2",
    r"x = \{1, 2\}", "a=4, -8, -10", "(p, q) = 1", "(x, y) = (1, 2), (3, 4)", "x = 3",
    r"y = -\frac{1}{2}x + \frac{3}{4}", r"\pi = 3.14, 3", "x_1^2 = 4, 5", "x = f(2), 3",
    "(a, b) = (1, 2] ", "x = |y|, 2", r"x=\sum_{k=1}^{n} k, 2", "d = 3, 4", r"x = (1, 2), \{3\}",
    # anything else with a relation in a list is a set of its elements
    "x = 1, y = 2", "x + 1 = 2, 3", "e = 2, 3", "f(x) = 1, 2", "x = 1, 2, y = 3", "2x = 4, 5",
    "3, x = 2", "1, 2 < x", "x < 1, 2", r"x \approx 2, 3", r"x = y \approx 2, 3",
    "x = 1 = 2, 3", "(x+1) = 2, 3", "x > 1, 2", "x = 1 = 2",
    # semicolons: groups of a list (tuples when any group has several), or an ordered tuple
    "-12;-11;-10", "(0;0;0),(0;-2;0)", "(0;0;0)", "1;2", "1,2;3,4", "x;y", r"\{1;2\}", "(1;2)",
    "x=1;y=2", "1; 2", "p=5,q=2;p=7,q=2", "x=1,2;3", "[1;2]", "(1;2]", "(1,2;3)", "1;2,3",
    r"1 \pm 2; 3", r"\{1;2, 3\}", r"(1;2) \cup (3;4)", "(0,1);(2,3)", "-12;-11;-10;-8;-7;-6",
    "(0;0;0),(0;-2;0),(0;0;6),(0;-2;6),(4;0;0),(4;-2;0),(4;0;6),(4;-2;6)", "x = 1; 2",
    "(p,q) = (1;2)", "1;", ";1", "(x;y)=1", r"(\frac{1}{2}; -3; x^2)",
]  # fmt: skip
_M = r"\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}"
_N = r"\begin{bmatrix}5 & 6 \\ 7 & 8\end{bmatrix}"
_V = r"\begin{pmatrix}1 \\ 2\end{pmatrix}"
_SHAPES += [  # sums and products of matrices, unevaluated (MatAdd, MatMul)
    f"{_M} + {_N}", f"{_M} {_N}", f"{_M} - {_N}", f"2{_M}", f"-{_M}", rf"{_M} \cdot {_V}",
    f"{_M} + {_N} + {_M}", f"{_M} + {_N} - {_M}", f"{_M} {_N} {_V}", f"x{_M}",
    rf"\frac{{1}}{{2}}{_M}", f"2{_M} + {_N}", f"{_M}, {_N}", f"({_M})", rf"{_M} \times {_N}",
    f"{_M} * {_N}", rf"2 \cdot {_M}", f"-2{_M}", f"{_M}{_V} + {_V}", f"{_V} - {_V}",
    f"{_M} + 1", f"{_M} + {_V}",
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
@pytest.mark.parametrize(
    ("corpus", "least_accepted"), [(_generated, 0.6), (_generated_newer, 0.4)], ids=["old", "new"]
)
def test_identical_to_the_grammar_on_a_generated_corpus(
    corpus: Callable[[], list[str]], least_accepted: float
) -> None:
    texts = _texts(corpus())
    accepted, wrong = _check(texts)
    assert not wrong, "\n".join(wrong[:20])
    assert accepted >= least_accepted * len(texts)


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
        r"\sum_{k}^{n} k",  # no k = a
        r"\int_0^1 x\,dx",
        r"\frac{d}{dx} x^2",
        r"x = (0,1) \cup (2,3)",  # a union after a name: the grammar's set_relation
        r"x = \begin{pmatrix}1\end{pmatrix}",
        "1,000",  # the grammar's comma number
        "1.5.2",
        "x^-1",
        "x^T",  # the lexer's transpose token
        "x^{T}",
        "tr",  # a bare-word token of the lexer (trace)
        "2 eye",
        "dx",  # a differential
        r"d \cdot 2",
        "f(x, y)",  # several arguments: each is parsed again from its text
        "x_1(2)",  # a subscripted name applied: its name is the raw text
        r"\alpha(x)",
        "|a|-b|c|",  # |a·|-b|·c| to the grammar
        "|a|b|c|",
        "||x||",
        r"\sin x |y|",  # sin(x·|y|)
        "12_x^2",  # the subscript's atom takes the power: 12
        "204_5 x",
        "a_e",  # e is not an atom to the grammar: a_{e} is a subscript, a_e does not parse
        "2^3^2",
        r"\sin 2x",  # where its argument ends is the grammar's to say
        r"\sin(x, y)",
        "f(1;2)",
        r"\begin{vmatrix}1 & 2\\3 & 4\end{vmatrix}",  # a determinant
        r"\begin{pmatrix}1\end{pmatrix} / 2",  # a matrix divided, powered or related
        r"\begin{pmatrix}1\end{pmatrix}^2",
        r"x = \begin{pmatrix}1\end{pmatrix}",
        r"\sin x \begin{pmatrix}1\end{pmatrix}",
        "3 + 4i",
        r"\frac{1}{",
        "",
    ],
)
def test_declines_what_it_does_not_read(text: str) -> None:
    assert read_fast(text, is_real=True) is None


def test_a_chain_that_does_not_parse_whole_reads_its_last_part_without_the_grammar(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from certd.domains.math import parse
    from certd.domains.math.limits import MathLimits

    calls: list[str] = []
    inner = parse._latex
    monkeypatch.setattr(parse, "_latex", lambda s: calls.append(s) or inner(s))
    got = parse._parse(r"1 = \zzz = x = 2x + 1", MathLimits(), True)
    assert got.value == inner("2x + 1")
    assert calls == [r"1 = \zzz = x = 2x + 1"]  # the whole, once; not the tail
