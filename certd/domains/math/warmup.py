"""Warm a process for math checking: parse representative answers once.

Example:
    >>> warm_up() >= 20
    True

The LaTeX grammar's prediction tables (ANTLR's DFA cache) and SymPy's caches fill as answers
are parsed, and SymPy imports its simplification and solving machinery on first use; a fresh
worker process would otherwise pay that on its first real checks. The
math pool's workers call ``warm_up()`` before they report ready (and the forkserver imports this
module, so workers forked from it start warm).

ANTLR's prediction DFA is keyed by token *types*, not text, so what fills it is coverage of
constructs, not of particular answers. ``prime_corpus()`` generates about 1,300 answers from
the tables below (every construct of ``_ATOMS`` joined by every operator and relation of
``_JOINS``, each structure of ``_SHAPES`` around a few atoms); it is built from these tables
only, never from benchmark or test cases. A math worker runs the grammar alone
(``parse.prime_grammar``) over it one answer at a time while it has no check to do
(``MathWork.prime``), so a worker that has been idle for a few seconds of CPU checks unseen
answers with most of the grammar's prediction work already done (the profiled cost of a
first pass), while start-up and replacement stay as quick as ``warm_up()``.
"""

from __future__ import annotations

from .errors import MathError
from .parse import parse_answer

__all__ = ["WARM_ANSWERS", "WARM_PAIRS", "prime_corpus", "warm_up"]

WARM_ANSWERS = (
    r"\frac{1}{2}",
    r"-\frac{3}{4}",
    r"\dfrac{\sqrt{3}}{2}",
    r"2\sqrt{5}",
    r"\sqrt[3]{2}",
    r"3^{10}",
    r"2^{-3}",
    r"x^2 + 2x + 1",
    r"(x - 1)(x + 2)",
    r"x = 3",
    r"y = 2x + 1",
    r"x > 1",
    r"-2 \le x \le 7",
    r"[1, 2)",
    r"(-\infty, 0) \cup (1, \infty)",
    r"\{1, 2, 3\}",
    r"(3, -1)",
    r"1, 2",
    r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}",
    r"\pi",
    r"\frac{\pi}{6}",
    r"e^{2}",
    r"\sin x + \cos x",
    r"\log_2 8",
    r"\ln 2",
    r"10!",
    r"\binom{5}{2}",
    r"|x - 1|",
    r"3 + 4i",
    r"\sum_{k=1}^{n} k",
    r"f(x) = x^2",
    r"a_{n} = 2n",
    r"12:00",
    r"50\%",
    r"\text{Evelyn}",
    r"1.5",
)


# (gold, response) pairs that run each comparison path once: trigonometric identities,
# relations read as sets, proportional equations, polynomial identities, matrices, sets,
# declared precision, percentages, text and choices. SymPy imports much of that machinery on
# first use (simplify, trigsimp, the inequality solvers), so a worker that has not compared
# anything pays it on its first real checks. None of these answers is a benchmark case (a
# test checks).
WARM_PAIRS = (
    (r"\cot^2(t)+1", r"\csc^2(t)"),
    (r"1<g(t)<2", "(1,2)"),
    (r"t \in [-1,5]", r"-1 \le t \le 5"),
    (r"3a+6b-9=0", r"b=-\frac{1}{2}a+\frac{3}{2}"),
    (r"\frac{t+3}{5}", r"\frac{t}{5}+\frac{3}{5}"),
    ("t<2", "t>-2"),
    (r"\frac{\sqrt{3}}{3}", r"\frac{1}{\sqrt{3}}"),
    (r"\begin{pmatrix}2&1\\0&5\end{pmatrix}", r"\begin{pmatrix}2&1\\0&5\end{pmatrix}"),
    (r"\{3,4\}", "4, 3"),
    ("2.7183", "e^{1}"),
    (r"\ln 3", r"\log_3 9"),
    (r"(t-1)(t+1)", "t^2-1"),
    (r"25\%", "0.25"),
    (r"\text{Paris}", r"\boxed{\text{paris}}"),
    ("D", r"\textbf{(D)}"),
    (r"[2, \infty)", r"t \ge 2"),
    (r"(-\infty, -1) \cup (4, \infty)", r"(4, \infty) \cup (-\infty, -1)"),
    (r"\frac{7}{3}", "2.333"),
    # Evaluated integrals and sums import SymPy's integration and summation code on first use
    # (about 0.3 CPU-s): done here, in the forkserver's preload, not in a check's 2 s.
    (r"\int_0^2 3t\,dt", "6"),
    (r"\sum_{t=1}^{3} t^2", "14"),
)


_ATOMS = (
    "7",
    "-12",
    "3.25",
    "x",
    "n",
    "a_{n}",
    "x_1",
    "\\pi",
    "\\infty",
    "\\sqrt{2}",
    "\\sqrt[3]{x}",
    "\\frac{a}{b}",
    "\\dfrac{1}{3}",
    "\\tfrac{5}{2}",
    "2^{10}",
    "x^2",
    "e^{-x}",
    "\\sin x",
    "\\cos(2x)",
    "\\tan^2(y)",
    "\\sec^2 y",
    "\\log_{2} 8",
    "\\ln(x)",
    "|x|",
    "\\left(x+1\\right)",
    "n!",
    "\\binom{n}{k}",
    "F_{n-k-1}",
    "10^{\\frac{1}{2}}",
    "\\frac{\\sqrt{3}}{2}",
    "3x^{2/3}",
    "\\sqrt[3]{x}^2",
    "90^\\circ",
    "5\\text{ cm}",
    "\\mathrm{d}x",
    "\\overline{AB}",
    "\\angle A",
    "f(x)",
    "f^{-1}(x)",
    "\\sum_{k=0}^{n} k",
    "\\prod_{i=1}^{n} i",
    "\\int_0^1 x\\,dx",
    "\\lim_{x \\to 0} x",
    "\\pm 2",
    "2i",
    "\\mathbb{R}",
    "\\emptyset",
    "\\{1, 2\\}",
    "\\max(a, b)",
    "\\lfloor x \\rfloor",
    "\\cdots",
)
_JOINS = (
    "+",
    "-",
    "\\cdot",
    "\\times",
    "/",
    " ",
    "=",
    "<",
    "\\le",
    "\\geq",
    "\\neq",
    "\\approx",
    ",",
    ":",
    "\\in",
    "\\cup",
    "\\quad",
    "\\text{ and }",
    ";",
)
_SHAPES = (
    "({0}, {1})",
    "[{0}, {1})",
    "({0}, {1}]",
    "[{0}, {1}]",
    "\\left[{0}, {1}\\right]",
    "\\{{{0}, {1}\\}}",
    "({0}, {1}) \\cup ({1}, \\infty)",
    "\\begin{{pmatrix}}{0} & {1} \\\\ {1} & {0}\\end{{pmatrix}}",
    "\\begin{{pmatrix}}{0}\\\\{1}\\end{{pmatrix}}",
    "\\begin{{bmatrix}}{0} & {1}\\end{{bmatrix}}",
    "\\begin{{array}}{{cc}}{0} & {1}\\end{{array}}",
    "{0} \\le x < {1}",
    "x = {0}, y = {1}",
    "y_{{1}}={0}, y_{{2}}={1}",
    "\\frac{{{0}}}{{{1}}}",
    "{0}^{{{1}}}",
    "\\sqrt{{{0} + {1}}}",
    "{0}\\%",
    "\\text{{{0}}}",
    "\\boxed{{{0}}}",
)


def prime_corpus() -> list[str]:
    """Generated answers covering the grammar's constructs (for ``parse.prime_grammar``).

    Returns:
        The answers, in a fixed order.
    """
    out: list[str] = []
    for i, a in enumerate(_ATOMS):
        b = _ATOMS[(i * 7 + 3) % len(_ATOMS)]
        for j in _JOINS:
            out.append(f"{a} {j} {b}")
        out.append(f"-{a}")
    for k, shape in enumerate(_SHAPES):
        for i in range(0, len(_ATOMS), 4):
            a, b = _ATOMS[(i + k) % len(_ATOMS)], _ATOMS[(i + 2 * k + 1) % len(_ATOMS)]
            out.append(shape.format(a, b))
    return out


def warm_up() -> int:
    """Parse ``WARM_ANSWERS`` and check ``WARM_PAIRS``; return how many answers parsed."""
    from .task import MathTask
    from .verify import verify_math

    ok = 0
    for text in WARM_ANSWERS:
        try:
            parse_answer(text)
            ok += 1
        except MathError:
            pass
    for gold, response in WARM_PAIRS:
        verify_math(MathTask(gold=gold), response)  # never raises
    return ok
