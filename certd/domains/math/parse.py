"""Answer text to a SymPy object, through ``latex2sympy2_extended``, with caps checked first.

Example:
    >>> p = parse_answer(r"\\frac{1}{2}")
    >>> p.value, p.percent, p.decimal
    (1/2, False, False)
    >>> parse_answer(r"50\\%").percent
    True

Order of work (every step bounded):

1. Text caps (``MathLimits``): characters, bracket nesting depth, ``\\frac`` count, integer
   literal length. 10,000 nested braces fail here, in microseconds.
2. Normalisation: ``latex2sympy2_extended.normalize_latex`` (``\\text{}`` units, ``\\left``/
   ``\\right``, malformed ``\\frac12``), thousands separators, decimal commas, a trailing
   percent sign, degree signs, ``\\in``-prefixes.
3. Parsing: the common shapes (numbers, fractions, radicals, polynomials, equations,
   intervals, sets, matrices) by ``fastlatex.read_fast``, which builds exactly the object the
   grammar would, in microseconds; everything else with ``latex2sympy2_extended.latex2sympy``
   (an ANTLR grammar). Neither uses ``eval`` or ``sympy.parse_expr`` on the text. Powers come
   back unevaluated.
4. Tree caps on the unevaluated tree, before anything evaluates it: node count and an upper
   bound on the digits of every power and factorial, so ``5^(5^(5^(5^5)))`` is refused
   without computing it.
5. Decimals become exact rationals (``0.5`` → ``1/2``); ``decimal`` records that the text
   wrote one, which allows the declared-precision comparison later.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any

import sympy
from antlr4.atn.PredictionMode import PredictionMode
from latex2sympy2_extended.latex2sympy2 import (
    ConversionConfig,
    NormalizationConfig,
    _Latex2Sympy,
    normalize_latex,
)

from .errors import MathLimitError, MathUnparsedError
from .fastlatex import read_fast
from .limits import MathLimits
from .textforms import latex_forms

__all__ = [
    "Parsed",
    "check_text_caps",
    "check_tree_caps",
    "normalized",
    "parse_answer",
    "prime_grammar",
]

_NORMALIZE = NormalizationConfig(
    basic_latex=True, units=True, malformed_operators=True, nits=True, boxed="all", equations=False
)
_CONVERT = ConversionConfig()
_COMPLEX = re.compile(r"\\mathbb\{C\}|\\i\b|(?<![A-Za-z\\])i(?![A-Za-z])|\\imath|\\mathrm\{i\}")


@dataclass(frozen=True, slots=True)
class Parsed:
    """A parsed answer.

    Attributes:
        value: the SymPy object (expression, relation, set, tuple, matrix) or a ``str`` for
            a plain text answer (``\\text{Evelyn}``) or a choice letter.
        text: the normalised text that was parsed.
        percent: the text ended in a percent sign (the value is the number before it).
        decimal: the text wrote a decimal number (so declared-precision comparison applies).
        degrees: the text wrote a degree sign (``90^\\circ``), so radians are also tried.
    """

    value: Any
    text: str
    percent: bool = False
    decimal: bool = False
    degrees: bool = False


def check_text_caps(text: str, limits: MathLimits) -> None:
    """Refuse text over a cap before any parser or SymPy sees it.

    Args:
        text: the answer text.
        limits: the caps.

    Raises:
        MathLimitError: over ``max_answer_chars``, ``max_brace_depth``, ``max_fracs`` or
            ``max_integer_digits``.
        MathUnparsedError: unbalanced brackets.
    """
    if len(text) > limits.max_answer_chars:
        raise MathLimitError(
            f"answer is {len(text)} chars, over max_answer_chars={limits.max_answer_chars}"
        )
    depth = 0
    braces = 0
    for c in text:
        if c in "{([":
            depth += 1
            if depth > limits.max_brace_depth:
                raise MathLimitError(
                    f"brackets nest deeper than max_brace_depth={limits.max_brace_depth}"
                )
            braces += c == "{"
        elif c in "})]":
            depth = max(0, depth - 1)
            braces -= c == "}"
            if braces < 0:
                raise MathUnparsedError("unbalanced braces: '}' without '{'")
    if braces != 0:
        raise MathUnparsedError("unbalanced braces: a '{' is never closed")
    fracs = text.count("\\frac") + text.count("\\dfrac") + text.count("\\tfrac")
    if fracs > limits.max_fracs:
        raise MathLimitError(f"{fracs} \\frac commands, over max_fracs={limits.max_fracs}")
    longest = max((len(m) for m in re.findall(r"\d+", text)), default=0)
    if longest > limits.max_integer_digits:
        raise MathLimitError(
            f"a {longest}-digit number, over max_integer_digits={limits.max_integer_digits}"
        )


def _nodes(expr: Any, max_tree_nodes: int) -> list[Any]:
    """The SymPy nodes of ``expr``, each before its arguments (an iterative walk).

    Raises:
        MathLimitError: there are more than ``max_tree_nodes``.
    """
    order: list[Any] = []
    stack: list[Any] = [expr]
    while stack:
        node = stack.pop()
        order.append(node)
        if len(order) > max_tree_nodes:
            raise MathLimitError(f"answer tree over max_tree_nodes={max_tree_nodes}")
        kids = list(node) if isinstance(node, sympy.MatrixBase) else getattr(node, "args", ())
        stack.extend(a for a in kids if isinstance(a, sympy.Basic | sympy.MatrixBase))
    return order


def check_tree_caps(expr: Any, limits: MathLimits) -> None:
    """Refuse an unevaluated tree that is too big or whose powers would be too large.

    Walks the tree iteratively (post-order) keeping two upper bounds per node: ``size``, the
    digits needed to write it exactly (``|log10|x||``), and ``mag``, ``log10 max(|x|, 1)``.
    A power ``b^e`` needs about ``|e|·size(b)`` digits, with ``|e| <= 10**mag(e)``; it is
    refused when that could exceed ``max_power_digits``, as is a factorial whose argument
    could.

    Args:
        expr: the parsed, unevaluated SymPy object.
        limits: the caps.

    Raises:
        MathLimitError: over ``max_tree_nodes`` or ``max_power_digits``.
    """
    if not isinstance(expr, sympy.Basic | sympy.MatrixBase):
        return
    order = _nodes(expr, limits.max_tree_nodes)
    cap = float(limits.max_power_digits)
    size: dict[int, float] = {}
    mag: dict[int, float] = {}
    for node in reversed(order):
        s = m = 0.0
        args: Any = node.args if isinstance(node, sympy.Basic) else ()
        if isinstance(node, sympy.Integer):
            s = m = math.log10(abs(int(node))) if node != 0 else 0.0
        elif isinstance(node, sympy.Rational):
            s = max(math.log10(abs(node.p) or 1), math.log10(node.q))
            m = max(0.0, math.log10(abs(node.p) or 1) - math.log10(node.q))
        elif isinstance(node, sympy.Float):
            s = m = abs(float(node._mpf_[2] + node._mpf_[3])) * math.log10(2)
        elif isinstance(node, sympy.Pow):
            b, e = args
            eb = mag.get(id(e), 0.0)
            if eb > math.log10(cap) + 1 and size.get(id(b), 0.0) > 0.0:
                raise MathLimitError(f"a power over max_power_digits={int(cap)} digits")
            s = (10.0**eb) * size.get(id(b), 0.0)
            if s > cap and b.is_number:
                raise MathLimitError(f"a power over max_power_digits={int(cap)} digits")
            m = 0.0 if (e.is_number and e.is_negative and mag.get(id(b), 0.0) > 0.0) else s
        elif isinstance(node, sympy.factorial | sympy.factorial2 | sympy.gamma):
            a = mag.get(id(args[0]), 0.0)
            if a > math.log10(cap):
                raise MathLimitError(f"a factorial over max_power_digits={int(cap)} digits")
            s = m = (10.0**a) * max(a, 1.0)
        elif isinstance(node, sympy.Mul):
            s = sum(size.get(id(a), 0.0) for a in args)
            m = sum(mag.get(id(a), 0.0) for a in args)
        elif args:
            extra = math.log10(len(args))
            s = max(size.get(id(a), 0.0) for a in args) + extra
            m = max(mag.get(id(a), 0.0) for a in args) + extra
        size[id(node)] = min(s, 10.0 * cap)
        mag[id(node)] = min(m, 10.0 * cap)


_THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3})((?:,\d{3})+)(?![\d,])")
_DEC_COMMA = re.compile(r"^(-?\d+),(\d{1,2})$|^(-?\d+),(\d{4,})$")
_PERCENT = re.compile(r"\s*(?:\\%|%|\\text\{\s*\\?%\s*\}|\\text\{\s*percent\s*\})\s*$")
_DEGREE = re.compile(r"\^\s*\{?\s*\\circ(?![A-Za-z])\s*\}?|°|\\degree(?![A-Za-z])")
_SPACES = re.compile(r"(?<!\\)\\[,;: ]|~|\\q?quad(?![A-Za-z])")
_MATHRM = re.compile(r"\\(?:mathrm|mathit|rm)\{([A-Za-z])\}")
_LEAD = re.compile(r"^\s*(?:[A-Za-z]\s*)?\\in(?![A-Za-z])\s*")
# An integer written right before "(" or \binom: the grammar reads "2(7)" as the mixed number
# 2 + 7 = 9 (its rule for 2\frac{1}{2}); an explicit \cdot makes it the product it is.
_INT_BEFORE_PAREN = re.compile(r"(?<![\w.^\\])(\d+)\s*(?=\(|\\binom(?![A-Za-z]))")
_FRAC_STYLE = re.compile(r"\\[dt]frac(?![A-Za-z])")
_DISPLAY = re.compile(r"\\displaystyle(?![A-Za-z])")
_DECIMAL = re.compile(r"(?<![\d.])\d*\.\d+")


def _normalize(text: str, numbers: bool) -> tuple[str, bool]:
    s = latex_forms(text.strip().strip('"').strip("$").strip())
    s = re.sub(r"\\\$", "", s)  # escaped dollar signs are currency
    joined = re.sub(r"\$?\s*\\text\{\s*(?:and|or)\s*\}\s*\$?|\$\s*(?:and|or)\s*\$", ",", s)
    joined = re.sub(r"\s+(?:and|or)\s+", ",", joined)
    if joined != s:  # "a and b": several answers, so commas separate them
        numbers = False
        s = re.sub(r",(?:\s*,)+", ",", joined)
    s = s.replace("$", " ")
    s = re.sub(r"(\d),\\!\s*(\d)", r"\1,\2", s)  # 11,\! 111 is a thousands separator
    s = re.sub(r"(?<!\\)\\!", "", s)
    s = _SPACES.sub(" ", s)
    s = _MATHRM.sub(r"\1", s)
    s = _FRAC_STYLE.sub(r"\\frac", s)
    s = _DISPLAY.sub("", s)
    s = re.sub(r"(?<!\\)\\!", "", s)
    percent = bool(_PERCENT.search(s))
    if percent:
        s = _PERCENT.sub("", s)
    s = _DEGREE.sub("", s)
    s = s.rstrip(" .")
    s = normalize_latex(s, _NORMALIZE)
    if _PERCENT.search(s):  # "28 percent" becomes "28\\%" here
        percent = True
        s = _PERCENT.sub("", s)
    s = _LEAD.sub("", s)
    s = _INT_BEFORE_PAREN.sub(r"\1 \\cdot ", s)
    if not numbers:  # the gold answer is a set or tuple: commas separate answers
        return s.strip(), percent
    if re.fullmatch(r"-?0,\d+", s.strip()):
        return s.strip().replace(",", "."), percent
    if re.fullmatch(r"-?\d{1,3}(?:(?:,\d{3})+|(?: \d{3})+)(?:\.\d+)?", s.strip()):
        return re.sub(r"[, ]", "", s.strip()), percent
    s = _THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(",", ""), s)
    m = _DEC_COMMA.match(s.strip())
    if m and m.group(1) is not None:
        s = f"{m.group(1)}.{m.group(2)}"
    elif re.fullmatch(r"-?0,\d+", s.strip()):
        s = s.replace(",", ".")
    return s.strip(), percent


def normalized(text: str, *, numbers: bool = True) -> tuple[str, bool]:
    """The text ``parse_answer`` would parse, and whether it ended in a percent sign.

    Cheap (regular expressions only): two answers with the same normalised text are the same
    answer without parsing either.
    """
    return _normalize(text, numbers)


def _exact(expr: Any) -> Any:
    """Replace every Float with the exact rational its decimal text denotes."""
    if isinstance(expr, sympy.Float):
        return sympy.Rational(str(expr))
    if isinstance(expr, sympy.MatrixBase):
        return expr.applyfunc(_exact)
    if isinstance(expr, sympy.Basic) and expr.has(sympy.Float):
        floats = {f: sympy.Rational(str(f)) for f in expr.atoms(sympy.Float)}
        return expr.xreplace(floats)
    return expr


_SIMPLE = re.compile(
    r"^(?P<sign>-?)\s*(?:(?P<int>\d+)|(?P<dec>\d*\.\d+)"
    r"|\\frac\{(?P<fn>\d+)\}\{(?P<fd>\d+)\}|(?P<sn>\d+)\s*/\s*(?P<sd>\d+))$"
)


def _simple(s: str) -> Any:
    """Integers, decimals and plain fractions, built directly (most answers; no ANTLR)."""
    m = _SIMPLE.match(s)
    if m is None:
        return None
    sign = -1 if m["sign"] else 1
    if m["int"] is not None:
        return sympy.Integer(sign * int(m["int"]))
    if m["dec"] is not None:
        return sign * sympy.Rational(m["dec"])
    num, den = (m["fn"], m["fd"]) if m["fn"] is not None else (m["sn"], m["sd"])
    if int(den) == 0:
        return None
    return sympy.Rational(sign * int(num), int(den))


_TEXT_ONLY = re.compile(r"^\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}$")


class _TwoStage(_Latex2Sympy):  # type: ignore[misc]  # the library's converter is untyped
    """The library's converter with ANTLR's two-stage parsing: SLL prediction first (its
    decisions are cached, so it is many times faster), full LL only when SLL reports an
    error. Where SLL succeeds it yields the parse LL would (the grammar's documented
    contract for SLL), so answers are read the same, faster."""

    sll = True

    def create_parser(self, latex_str: str) -> Any:
        parser = super().create_parser(latex_str)
        if self.sll:
            parser._interp.predictionMode = PredictionMode.SLL
        return parser


def _latex(s: str) -> Any:
    converter = _TwoStage(None, not _COMPLEX.search(s), False, config=_CONVERT)
    for sll in (True, False):
        converter.sll = sll
        try:
            return converter.parse(s)
        except (RecursionError, MemoryError):
            raise
        except Exception as e:  # noqa: BLE001 - the parser raises bare Exception; translated once
            if not sll:
                why = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
                raise MathUnparsedError(f"does not parse: {why}") from None
    raise AssertionError("unreachable")


def prime_grammar(text: str, *, numbers: bool = True) -> bool:
    """Run only the grammar's (SLL) parse of ``text`` to fill ANTLR's shared prediction cache.

    Nothing is converted or evaluated and nothing is returned but success: this is for
    warming a process (``warmup.warm_up``). Text over the default caps is skipped.

    Args:
        text: answer text, normalised here as ``parse_answer`` would.
        numbers: as in ``parse_answer``.

    Returns:
        Whether the grammar accepted it.
    """
    try:
        check_text_caps(text, MathLimits())
        s, _ = _normalize(text, numbers)
        if not s:
            return False
        converter = _TwoStage(None, not _COMPLEX.search(s), False, config=_CONVERT)
        converter.create_parser(s).math()
        return True
    except MemoryError:
        raise
    except Exception:  # noqa: BLE001 - the parser raises bare Exception; only warming here
        return False


def parse_answer(text: str, limits: MathLimits | None = None, *, numbers: bool = True) -> Parsed:
    """Parse answer text into a SymPy object (or a plain string for text answers).

    Results are cached per process (gold answers repeat across a task's responses, and so do
    common answers); ``Parsed`` values are immutable.

    Args:
        text: the extracted answer text (LaTeX or a plain expression).
        limits: the caps (default ``MathLimits()``).
        numbers: read ``1,5`` as a decimal comma and ``1, 000`` as thousands (the gold is a
            number); False when the gold is a set or tuple, where commas separate answers.

    Raises:
        MathLimitError: the text or the parsed tree is over a cap.
        MathUnparsedError: the text does not parse.

    Returns:
        The parsed answer.
    """
    return _parse_cached(text, limits or MathLimits(), numbers)


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str, limits: MathLimits, numbers: bool) -> Parsed:
    return _parse(text, limits, numbers)


def _parse(text: str, lim: MathLimits, numbers: bool) -> Parsed:
    check_text_caps(text, lim)
    s, percent = _normalize(text, numbers)
    if not s:
        raise MathUnparsedError("empty answer")
    word = _TEXT_ONLY.match(s)
    if word is not None and not re.search(r"\d", word.group(1)):
        return Parsed(word.group(1).strip().lower(), s, percent, False)
    check_text_caps(s, lim)
    degrees = bool(_DEGREE.search(text))
    fast = _simple(s)
    if fast is not None:
        return Parsed(fast, s, percent, "." in s, degrees)
    value = read_fast(s, is_real=not _COMPLEX.search(s))
    try:
        if value is None:
            value = _latex(s)
    except MathUnparsedError:
        # A chain "a = b = c" that does not parse whole: its last part is the answer.
        parts = re.split(r"(?<![<>!\\])=", s)
        tail = parts[-1].strip()
        if len(parts) < 3 or "," in s or not tail:
            raise
        value = _simple(tail)
        if value is None:
            value = read_fast(tail, is_real=not _COMPLEX.search(tail))
        if value is None:
            value = _latex(tail)
    if value is None:
        raise MathUnparsedError("does not parse")
    check_tree_caps(value, lim)
    decimal = bool(_DECIMAL.search(s))
    return Parsed(_exact(_two_sided(value)), s, percent, decimal, degrees)


def _two_sided(value: Any) -> Any:
    """A limit written ``\\lim_{x\\to a}`` is two-sided (the grammar reads it from the
    right): when its sides differ it does not exist (``docs/math-domain.md``, "Limits")."""
    if not isinstance(value, sympy.Basic) or not value.has(sympy.Limit):
        return value
    sides = {
        lim: sympy.Limit(*lim.args[:3], dir="+-")
        for lim in value.atoms(sympy.Limit)
        if lim.args[2].is_finite and str(lim.args[3]) == "+"
    }
    return value.xreplace(sides) if sides else value
