"""A fast reader for the common shapes of answer LaTeX that builds exactly what the grammar
builds, and declines everything else.

Example:
    >>> read_fast(r"y = -\\frac{1}{2}x + \\frac{3}{4}", is_real=True)  # unevaluated, as read
    Eq(y, -1*1/2*x + 3/4)
    >>> read_fast(r"(3, 1) \\cup [2, \\infty)", is_real=True)  # (3, 1) is a pair, not an interval
    Union({1, 3}, Interval(2, oo))
    >>> read_fast("n = 1, 2, 3", is_real=True)  # the grammar's reading: one relation, a set
    Eq(n, {1, 2, 3})
    >>> read_fast("f(2) < f(1)", is_real=True)  # a letter applied to an atom is a call
    f(2) < f(1)
    >>> read_fast(r"\\int_0^1 x\\,dx", is_real=True) is None   # not in the subset: declined
    True

Why: ``latex2sympy2_extended`` parses with an ANTLR grammar in pure Python; on a 2-core
machine its parse is most of the cost of checking an answer (10–300 ms for a matrix, an
equation or an interval union). Most answers use a small part of the grammar. This module
reads that part with a hand-written recursive-descent parser (microseconds) and builds the
SymPy object with the same constructors, in the same order, as the library's converter
(``_Latex2Sympy.convert_*``), so the object is *identical* (``==`` and ``srepr``), not merely
equivalent. ``tests/unit/math/test_fastlatex.py`` checks that on every answer of the warm-up
and priming corpora, the trap suite, a generated corpus and Math-Verify's public cases.

The subset (anything else returns ``None`` and the caller uses the grammar):

- numbers ``12``, ``3.25``, and with a base subscript the grammar drops (``204_5`` is 204);
  single letters except ``E i I j`` (the letter the grammar reads as a symbol ``e``, the
  imaginary unit), with ``d`` only where it is not a differential (``dx``), and no run of
  letters the grammar's lexer reads as one word (``tr``, ``eye``, ``svd``…); ``e`` and
  ``e^{…}`` (Euler's number, ``exp``); Greek letters; ``\\pi``; ``\\infty``; subscripts
  ``x_1``, ``a_{n}``, ``F_{n-k-1}``;
- ``+ -`` (binary and unary), ``* \\cdot \\times / \\div :``, implicit products (with the
  grammar's mixed-number reading: ``2\\frac{1}{2}`` is 5/2), ``^`` with a braced, digit or
  letter exponent (not the transpose ``^T``), ``!``, ``\\frac{}{}``, ``\\sqrt{}``,
  ``\\sqrt[n]{}``, parentheses, ``\\lfloor…\\rfloor`` and ``\\lceil…\\rceil``, ``|…|``
  (``Abs``) where no bar could be read otherwise;
- ``\\sin``-family functions, ``\\sinh``, ``\\cosh``, ``\\tanh``, ``\\arcsin``-family,
  ``\\exp``, ``\\ln``, ``\\log``, ``\\log_b`` with a parenthesised argument or a lone
  atom (``\\sin x``, which ends at the next function: ``2\\sin b \\cos a``), ``\\sin^2(x)``,
  ``\\sin^{-1}(x)``; ``\\sum_{k=a}^{b}`` and ``\\prod`` over a product chain;
- a letter applied to one atom, which the grammar reads as a call: ``f(x)``, ``f(2)``,
  ``f^2(x)`` are ``Function('f')(…)``; before anything else in parentheses a letter is a
  factor (``x(x+1)``, ``f(-1)``);
- relations ``= < > \\le \\ge \\ne`` (chains become ``And``, as the grammar's) and
  ``\\approx``, which keeps the right side after names only (``x \\approx 3`` is 3,
  ``2x \\approx 3`` is 2x), as the converter does;
- at the top: lists separated by commas and semicolons (groups become tuples), ``a \\pm b``,
  intervals and tuples ``(a, b]``, ``(0; -2; 6)``, sets ``\\{…\\}``, unions with ``\\cup``;
  names, ``=``, then values (``n = 1, 2, 3`` is ``Eq(n, {1, 2, 3})``, ``(p, q) = (3, 2)``,
  ``D = (0, 1)``), the grammar's ``set_elements_relation``; a matrix (``pmatrix``,
  ``bmatrix``, ``matrix``) alone, or in sums and products (``MatAdd``, ``MatMul``).

Declined, among others: a subscripted or Greek name applied to an atom (its function name is
the grammar's raw text), several arguments ``f(x, y)`` (each is parsed again from its text),
nested bars, a matrix divided, powered or in a relation. The reader evaluates exactly where
the converter does (integer fractions become ``Rational``, ``e^{…}`` becomes ``exp(…)``,
intervals and sums are built by their constructors) and nowhere else; the caps
(``parse.check_tree_caps``) still run on its result before anything else evaluates it.

Layout: ``_lexer`` (tokens, the token kinds, the cursor over them), ``_build`` (the
converter's SymPy constructors), ``_expr`` (sums, products, powers), ``_atoms`` (numbers,
names, calls, functions, ``|…|``, matrices) and ``_top`` (lists, sets, intervals, tuples,
relations); each reader class extends the one before it.
"""

from __future__ import annotations

import re
from typing import Any

from ._build import _UNDECIDED
from ._lexer import _Decline
from ._top import _Reader

__all__ = ["read_fast"]

_COMMA_NUMBER = re.compile(r"^\s*-?\d{1,3}(,\d{3})+(\.\d+)?\s*$")  # the grammar reads a number


def read_fast(text: str, *, is_real: bool) -> Any | None:
    """Read normalised answer text in the common subset, or return None.

    Args:
        text: normalised answer text (``parse._normalize``'s output, as the grammar gets).
        is_real: the symbols' ``real`` assumption (as the grammar's converter is given).

    Returns:
        The SymPy object the grammar's converter would build, or None when the text is
        outside the subset (the caller then parses it with the grammar).
    """
    if _COMMA_NUMBER.match(text):
        return None
    try:
        return _Reader(text, is_real).top()
    except (_Decline, IndexError):
        return None
    except _UNDECIDED:
        return None  # a construction SymPy refuses: the grammar's converter decides
