"""Plain-text and Unicode forms of answers rewritten as the LaTeX the grammar reads.

Example:
    >>> latex_forms("x²+½")
    'x^{2}+\\\\frac{1}{2}'
    >>> latex_forms("0.1\\\\overline{6}")
    '\\\\frac{15}{90}'
    >>> latex_forms("0.(3)")
    '\\\\frac{3}{9}'
    >>> latex_forms("√2 – ∞")
    '\\\\sqrt{2} - \\\\infty'

Rewritten: superscript digits (``x²`` → ``x^{2}``), vulgar fractions (``½``), ``√`` before a
number, a letter or a bracket, ``∞``, ``π``, ``×``, ``·``, ``≤``, ``≥``, ``≠``, the en dash
and the minus sign as ``-``, and repeating decimals: ``0.\\overline{3}``, ``1.1\\overline{6}``,
``\\dot{3}``-free forms ``0.(3)`` (only when the whole answer is one such number), each as the
exact fraction it denotes.
"""

from __future__ import annotations

import re

__all__ = ["latex_forms"]

_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_SUPER_RUN = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+")
_VULGAR = {
    "½": r"\frac{1}{2}",
    "⅓": r"\frac{1}{3}",
    "⅔": r"\frac{2}{3}",
    "¼": r"\frac{1}{4}",
    "¾": r"\frac{3}{4}",
    "⅕": r"\frac{1}{5}",
    "⅙": r"\frac{1}{6}",
    "⅛": r"\frac{1}{8}",
}
_SYMBOLS = {
    "∞": r"\infty ",
    "π": r"\pi ",
    "×": r"\times ",
    "·": r"\cdot ",
    "≤": r"\le ",
    "≥": r"\ge ",
    "≠": r"\ne ",
    "–": "-",
    "−": "-",
}
_ROOT = re.compile(r"√\s*(\d+(?:\.\d+)?|[A-Za-z]|\([^()]*\)|\{[^{}]*\})")
_OVERLINE = re.compile(r"(?<![\d.])(-?)(\d*)\.(\d*)\\overline\{(\d+)\}")
_PAREN_REPEAT = re.compile(r"\s*(-?)(\d*)\.(\d*)\((\d+)\)\s*")


def _repeating(sign: str, whole: str, head: str, cycle: str) -> str:
    """``whole.head(cycle)`` as ``\\frac{num}{den}``, exact."""
    den = 10 ** len(head) * (10 ** len(cycle) - 1)
    num = int((whole or "0") + head + cycle) - int((whole or "0") + head or "0")
    return f"{sign}\\frac{{{num}}}{{{den}}}"


def latex_forms(text: str) -> str:
    """``text`` with the plain and Unicode forms of the module docstring rewritten.

    Args:
        text: an answer's text.

    Returns:
        The rewritten text (unchanged when it holds none of them).
    """
    s = text
    if not s.isascii():
        s = _SUPER_RUN.sub(lambda m: "^{" + m.group(0).translate(_SUPERSCRIPT) + "}", s)
        for k, v in {**_VULGAR, **_SYMBOLS}.items():
            s = s.replace(k, v)
        s = _ROOT.sub(lambda m: "\\sqrt{" + m.group(1).strip("{}") + "}", s)
        s = s.rstrip()
    if "overline" in s:
        s = _OVERLINE.sub(lambda m: _repeating(*m.groups()), s)
    m = _PAREN_REPEAT.fullmatch(s)
    if m is not None:
        s = _repeating(*m.groups())
    return s
