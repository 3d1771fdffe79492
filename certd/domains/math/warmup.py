"""Warm a process for math checking: parse representative answers once.

Example:
    >>> warm_up() >= 20
    True

The LaTeX grammar's prediction tables (ANTLR's DFA cache) and SymPy's caches fill as answers
are parsed; a fresh worker process would otherwise pay that on its first real checks. The
math pool's workers call ``warm_up()`` before they report ready (and the forkserver imports this
module, so workers forked from it start warm).
"""

from __future__ import annotations

from .errors import MathUnparsedError
from .parse import parse_answer

__all__ = ["WARM_ANSWERS", "warm_up"]

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


def warm_up() -> int:
    """Parse ``WARM_ANSWERS``; return how many parsed."""
    ok = 0
    for text in WARM_ANSWERS:
        try:
            parse_answer(text)
            ok += 1
        except MathUnparsedError:
            pass
    return ok
