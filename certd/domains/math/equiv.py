"""Gold-guided equivalence of parsed answers.

Example:
    >>> from certd.domains.math.parse import parse_answer
    >>> equivalent(parse_answer("x = 3"), parse_answer("3"))
    True
    >>> equivalent(parse_answer(r"1-\\frac{1}{e}"), parse_answer(r"1+\\frac{1}{e}"))
    False

The gold answer decides how the prediction is read:

- **numbers and expressions**: exact (``identity.IdentityTest``: rationals and rational
  functions exactly, other constants by adaptive precision plus an exact proof of zero, other
  expressions at seeded random points; decimals were made exact by the parser). Only when the
  task declares ``precision_digits`` and a side *wrote* a decimal is a tolerance used: half a
  unit in the gold's last declared significant digit.
- **percentages**: ``50%`` against gold ``50`` or ``0.5`` (and the other way round).
- **equations**: gold ``x = 3`` against ``3``; a predicted ``x = 3`` against gold ``3``; a
  predicted relation between constants must hold (``4 = 3`` is wrong for gold ``3``);
  two equations are the same when ``lhs - rhs`` of one is a nonzero constant multiple of the
  other's (``3 = x`` equals ``x = 3``). Identities (``lhs - rhs`` simplifies to 0) are equal
  only to the same text, so two different equations that both simplify to 0 stay different.
- **inequalities**: flipped relations match (``x > 1`` equals ``1 < x``); a relation against
  a set or interval is compared as the set it defines.
- **sets, intervals and unions**: as sets (element order free; endpoints and openness must
  match); **several answers** (``1, 2``) are a set, in any order.
- **tuples and ordered pairs, matrices**: same shape, element by element, in order.
- **text answers** (``\\text{Evelyn}``) and choice letters: case-insensitive text.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import sympy
from sympy.core.evalf import PrecisionExhausted
from sympy.core.relational import Relational
from sympy.sets.sets import Set

from .identity import IdentityTest, literal_digits
from .parse import Parsed

__all__ = ["equivalent", "values_equal"]


def _is_rel(x: Any) -> bool:
    return isinstance(x, Relational) or (
        isinstance(x, sympy.And) and all(isinstance(a, Relational) for a in x.args)
    )


def _is_assignment(x: Any) -> bool:
    """``x = 3``, ``f(x) = …``, ``(p, q) = (3, 2)``, ``AB = 4``, ``V_1 : V_2 = 11 : 21``: an
    equation whose left side names a quantity (symbols only, no numbers but ±1)."""
    if not isinstance(x, sympy.Eq):
        return False
    lhs = x.lhs
    if isinstance(lhs, sympy.Tuple):
        return all(isinstance(a, sympy.Symbol) for a in lhs)
    if not isinstance(lhs, sympy.Basic) or not lhs.free_symbols:
        return False
    return all(abs(n) == 1 for n in lhs.atoms(sympy.Number))


def _unchain(x: Any) -> Any:
    """``x = 5+5+1 = 11`` (a chain of equations) → ``x = 11``."""
    if isinstance(x, sympy.And) and x.args and all(isinstance(a, sympy.Eq) for a in x.args):
        eqs = sorted(x.args, key=sympy.default_sort_key)
        lhs_all = {e.lhs for e in eqs}
        rhs_all = {e.rhs for e in eqs}
        first = [e for e in eqs if e.lhs not in rhs_all]
        last = [e for e in eqs if e.rhs not in lhs_all]
        if len(first) == 1 and len(last) == 1:
            return sympy.Eq(first[0].lhs, last[0].rhs, evaluate=False)
    return x


_ERRORS = (TypeError, ValueError, AttributeError, NotImplementedError, ZeroDivisionError)

# The current check's identity test (its seed and random points); ``equivalent`` sets it.
_TEST: ContextVar[IdentityTest | None] = ContextVar("math_identity_test", default=None)


def _test() -> IdentityTest:
    test = _TEST.get()
    return test if test is not None else IdentityTest(seed=secrets.token_bytes(16))


def _zero(diff: Any) -> bool:
    """Whether ``diff`` is zero: exact, or at every random point (``identity.py``)."""
    return _test().is_zero(diff)


def _num(x: Any, digits: int) -> sympy.Number | None:
    """``x`` as an exact Rational, or a Float good to ``digits`` + 20 significant digits."""
    if isinstance(x, sympy.Rational):
        return x
    try:
        v = x.evalf(digits + 20, strict=True, maxn=100 + 2 * literal_digits(x))
    except (PrecisionExhausted, *_ERRORS):
        return None
    return v if isinstance(v, sympy.Float) else None


def _exponent(mag: sympy.Rational) -> int:
    """``floor(log10(mag))`` of a positive rational, exactly."""
    e = int((int(mag.p).bit_length() - int(mag.q).bit_length()) * 0.30103)
    ten = sympy.Integer(10)
    while ten**e > mag:
        e -= 1
    while ten ** (e + 1) <= mag:
        e += 1
    return e


def _within(g: Any, p: Any, digits: int) -> bool:
    """Agreement to the declared precision: ``|p - g| <= ½·10^(E - digits + 1)`` where
    ``E = floor(log10 |g|)``: half a unit in the gold's last declared significant digit
    (a gold of 0 is matched only exactly)."""
    x, y = _num(g, digits), _num(p, digits)
    if x is None or y is None or x == 0:
        return False
    gx, py = sympy.Rational(x), sympy.Rational(y)
    tol = sympy.Rational(1, 2) * sympy.Rational(10) ** (_exponent(abs(gx)) - digits + 1)
    return bool(abs(py - gx) <= tol)


def values_equal(g: Any, p: Any, *, digits: int, approx: bool) -> bool:
    """Whether two parsed values are equal (the core comparison, gold first).

    Args:
        g: the gold value.
        p: the predicted value.
        digits: declared precision (significant digits) for decimal answers.
        approx: a side wrote a decimal, so ``digits`` applies after the exact check.

    Returns:
        True when equal.
    """
    if isinstance(g, str) or isinstance(p, str):
        return _text(g) == _text(p)
    if _is_rel(p) and _false_relation(p):
        return False  # "4 = 3" is not an answer of 3: a relation is judged whole
    g, p = _unchain(g), _unchain(p)
    if _is_pair(g, p) or _is_pair(p, g):
        a, b = (g, p) if isinstance(g, sympy.Interval) else (p, g)
        return values_equal(a.start, b[0], digits=digits, approx=approx) and values_equal(
            a.end, b[1], digits=digits, approx=approx
        )
    if _is_rel(g) or _is_rel(p):
        return _relations(g, p, digits=digits, approx=approx)
    g, p = _doit_matrix(g), _doit_matrix(p)
    if isinstance(g, sympy.MatrixBase) or isinstance(p, sympy.MatrixBase):
        if not (isinstance(g, sympy.MatrixBase) and isinstance(p, sympy.MatrixBase)):
            return False
        if g.shape != p.shape:
            return False
        return all(
            values_equal(a, b, digits=digits, approx=approx)
            for a, b in zip(list(g), list(p), strict=True)
        )
    if isinstance(g, Set) or isinstance(p, Set):
        return _sets(g, p, digits=digits, approx=approx)
    if isinstance(g, sympy.Tuple) or isinstance(p, sympy.Tuple):
        if not (isinstance(g, sympy.Tuple) and isinstance(p, sympy.Tuple)) or len(g) != len(p):
            return False
        pairs = zip(g, p, strict=True)
        return all(values_equal(a, b, digits=digits, approx=approx) for a, b in pairs)
    if not isinstance(g, sympy.Basic) or not isinstance(p, sympy.Basic):
        return False
    if g.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo) or p.has(sympy.zoo, sympy.nan):
        if g == p:
            return not g.has(sympy.zoo, sympy.nan)
        return bool(_infinite(g) == _infinite(p) and not g.has(sympy.zoo, sympy.nan))
    if g == p:
        return True
    try:
        diff = g - p
    except (TypeError, ValueError):
        return False
    if _zero(diff):
        return True
    if approx and not (g.free_symbols or p.free_symbols):
        return _within(g, p, digits)
    return False


def _infinite(x: Any) -> Any:
    """``\\infty + 1`` evaluated to ``\\infty`` (the parser leaves sums unevaluated); a
    form that does not evaluate stays as it is."""
    if isinstance(x, sympy.Expr) and not x.free_symbols and len(x.args) > 1:
        try:
            return sympy.sympify(x.doit())
        except _ERRORS:
            return x
    return x


def _doit_matrix(x: Any) -> Any:
    """``A + B`` or ``A B`` written with explicit matrices, evaluated (sizes are capped)."""
    if isinstance(x, sympy.MatrixExpr) and not isinstance(x, sympy.MatrixBase):
        try:
            return x.doit()
        except (TypeError, ValueError, sympy.ShapeError):
            return x
    return x


def _is_pair(a: Any, b: Any) -> bool:
    """``(a, b)`` read as an open interval on one side and an ordered pair on the other."""
    return (
        isinstance(a, sympy.Interval)
        and a.left_open
        and a.right_open
        and isinstance(b, sympy.Tuple)
        and len(b) == 2
    )


def _text(x: Any) -> str:
    s = x if isinstance(x, str) else str(x)
    return "".join(s.lower().split()).replace("\\text{", "").replace("}", "").replace("*", "")


# (relation class, symbol on the left) → the interval it defines, from the constant c
_HALF_LINES: dict[tuple[type, bool], Callable[[Any], Set]] = {
    (sympy.StrictLessThan, True): lambda c: sympy.Interval(-sympy.oo, c, True, True),
    (sympy.LessThan, True): lambda c: sympy.Interval(-sympy.oo, c, True, False),
    (sympy.StrictGreaterThan, True): lambda c: sympy.Interval(c, sympy.oo, True, True),
    (sympy.GreaterThan, True): lambda c: sympy.Interval(c, sympy.oo, False, True),
    (sympy.StrictLessThan, False): lambda c: sympy.Interval(c, sympy.oo, True, True),
    (sympy.LessThan, False): lambda c: sympy.Interval(c, sympy.oo, False, True),
    (sympy.StrictGreaterThan, False): lambda c: sympy.Interval(-sympy.oo, c, True, True),
    (sympy.GreaterThan, False): lambda c: sympy.Interval(-sympy.oo, c, True, False),
}


def _simple_set(x: Any) -> Set | None:
    """The set of ``x < c``, ``c <= x``, ``x = c`` (x a real symbol, c a rational number)
    and of ``And``s of them in one symbol, built directly (``as_set`` solves them, slowly);
    None for anything else."""
    parts = list(x.args) if isinstance(x, sympy.And) else [x]
    sets = []
    symbol = None
    for r in parts:
        if not isinstance(r, Relational):
            return None
        left = isinstance(r.lhs, sympy.Symbol)
        sym, c = (r.lhs, r.rhs) if left else (r.rhs, r.lhs)
        if not (isinstance(sym, sympy.Symbol) and sym.is_real is True and c.is_Rational):
            return None
        if symbol not in (None, sym):
            return None
        symbol = sym
        if isinstance(r, sympy.Eq):
            sets.append(sympy.FiniteSet(c))
        elif (type(r), left) in _HALF_LINES:
            sets.append(_HALF_LINES[type(r), left](c))
        else:
            return None
    return sympy.Intersection(*sets) if len(sets) > 1 else sets[0]


def _as_set(x: Any) -> Set | None:
    if isinstance(x, Set):
        return x
    if _is_rel(x):
        fast = _simple_set(x)
        if fast is not None:
            return fast
        funcs = x.atoms(sympy.core.function.AppliedUndef)
        if len(funcs) == 1 and not x.free_symbols - next(iter(funcs)).free_symbols:
            x = x.xreplace({next(iter(funcs)): sympy.Dummy("f")})
        syms = x.free_symbols
        if len(syms) != 1:
            return None
        try:
            got = x.as_set()
        except (NotImplementedError, TypeError, ValueError, AttributeError):
            return None
        return got if isinstance(got, Set) else None
    return None


def _sets(g: Any, p: Any, *, digits: int, approx: bool) -> bool:
    if isinstance(g, sympy.FiniteSet) and isinstance(p, sympy.FiniteSet):
        return _same_elements(list(g.args), list(p.args), digits=digits, approx=approx)
    if isinstance(g, sympy.FiniteSet) and isinstance(p, sympy.Tuple):
        return _same_elements(list(g.args), list(p.args), digits=digits, approx=approx)
    if isinstance(p, sympy.FiniteSet) and isinstance(g, sympy.Tuple):
        return False
    gs, ps = _as_set(g), _as_set(p)
    if gs is None or ps is None:
        # One answer against a one-element set.
        if isinstance(g, sympy.FiniteSet) and len(g.args) == 1 and not isinstance(p, Set):
            return values_equal(g.args[0], p, digits=digits, approx=approx)
        if isinstance(p, sympy.FiniteSet) and len(p.args) == 1 and not isinstance(g, Set):
            return values_equal(g, p.args[0], digits=digits, approx=approx)
        return False
    if gs == ps:
        return True
    if isinstance(gs, sympy.Interval) and isinstance(ps, sympy.Interval):
        return (
            gs.left_open == ps.left_open
            and gs.right_open == ps.right_open
            and values_equal(gs.start, ps.start, digits=digits, approx=approx)
            and values_equal(gs.end, ps.end, digits=digits, approx=approx)
        )
    if isinstance(gs, sympy.Union) and isinstance(ps, sympy.Union):
        return _same_elements(list(gs.args), list(ps.args), digits=digits, approx=approx)
    try:
        return bool(sympy.Complement(gs, ps) == sympy.EmptySet) and bool(
            sympy.Complement(ps, gs) == sympy.EmptySet
        )
    except (TypeError, ValueError, NotImplementedError):
        return False


def _same_elements(gs: list[Any], ps: list[Any], *, digits: int, approx: bool) -> bool:
    """A perfect matching between two lists under ``values_equal`` (any order)."""
    if len(gs) != len(ps):
        return False
    left = list(ps)
    for g in gs:
        for i, p in enumerate(left):
            if values_equal(g, p, digits=digits, approx=approx):
                del left[i]
                break
        else:
            return False
    return True


_FLIP = {
    sympy.StrictGreaterThan: sympy.StrictLessThan,
    sympy.GreaterThan: sympy.LessThan,
}


def _oriented(r: Relational) -> tuple[type, Any]:
    """(relation class, lhs - rhs) with ``>``/``>=`` flipped to ``<``/``<=``."""
    cls = type(r)
    if cls in _FLIP:
        return _FLIP[cls], r.rhs - r.lhs
    return cls, r.lhs - r.rhs


def _relations(g: Any, p: Any, *, digits: int, approx: bool) -> bool:
    g_rel, p_rel = _is_rel(g), _is_rel(p)
    if g_rel and not p_rel:
        if _is_assignment(g) and values_equal(g.rhs, p, digits=digits, approx=approx):
            return True  # x = 3 against 3
        return isinstance(p, Set) and _sets(g, p, digits=digits, approx=approx)
    if p_rel and not g_rel:
        if isinstance(p, sympy.Eq) and values_equal(g, p.rhs, digits=digits, approx=approx):
            return True  # a predicted x = 3 against gold 3
        return isinstance(g, Set) and _sets(g, p, digits=digits, approx=approx)
    if isinstance(g, sympy.And) or isinstance(p, sympy.And):
        gs, ps = _as_set(g), _as_set(p)
        return gs is not None and ps is not None and gs == ps
    if _is_assignment(g) and _is_assignment(p):
        return g.lhs == p.lhs and values_equal(g.rhs, p.rhs, digits=digits, approx=approx)
    gc, gd = _oriented(g)
    pc, pd = _oriented(p)
    if gc is not pc:
        return False
    if _zero(gd) or _zero(pd):  # identities are equal only to the same text
        return bool(sympy.srepr(g) == sympy.srepr(p))
    if isinstance(g, sympy.Eq | sympy.Ne):
        return _proportional(gd, pd, positive=False)
    return _proportional(gd, pd, positive=True)


def _false_relation(x: Any) -> bool:
    """Whether a relation between constants, or a chain of them, does not hold (``4 = 3``,
    ``1 = 2 = 3``, ``5 < 2``). A chain that names a quantity (``x = 5+5+1 = 7 = 11``) is read
    by its last value, as Math-Verify reads it (docs/math-domain.md, "Relations")."""
    if x.free_symbols:
        return False
    links = x.args if isinstance(x, sympy.And) else (x,)
    for r in links:
        if not isinstance(r, Relational) or r.free_symbols:
            continue
        if not (isinstance(r.lhs, sympy.Expr) and isinstance(r.rhs, sympy.Expr)):
            continue
        cls, d = _oriented(r)
        zero = _zero(d)
        if cls is sympy.Eq:
            holds = zero
        elif cls is sympy.Ne:
            holds = not zero
        elif zero:
            holds = cls is sympy.LessThan
        else:
            try:
                holds = bool(sympy.N(d, 30) < 0)
            except (TypeError, ValueError):
                holds = False  # complex or not comparable: not a true inequality
        if not holds:
            return True
    return False


def _proportional(a: Any, b: Any, *, positive: bool) -> bool:
    if _zero(a - b):
        return True
    if _test().nonconstant(a, b):
        return False  # not a constant multiple: no need to simplify
    try:
        ratio = sympy.cancel(a / b)  # exact for rational functions, far cheaper than simplify
        if ratio.free_symbols:
            ratio = sympy.simplify(a / b)
    except (TypeError, ValueError, ZeroDivisionError, NotImplementedError):
        return False
    if ratio.free_symbols or not ratio.is_number or ratio == 0:
        return False
    return not positive or bool(ratio.is_positive)


def _imaginary(x: Any) -> Any:
    """``x`` with a variable named ``i`` read as the imaginary unit (``x`` itself when it has
    none)."""
    if not isinstance(x, sympy.Basic):
        return x
    named = {s: sympy.I for s in x.free_symbols if getattr(s, "name", "") == "i"}
    if not named:
        return x
    try:
        return x.xreplace(named)
    except _ERRORS:
        return x


def _percent_variants(x: Parsed, gold: Parsed | None = None) -> list[Any]:
    """The readings of ``x``: itself; ``x/100`` after a percent sign; ``x·π/180`` after a
    degree sign when the gold is written with π (``90^\\circ`` against ``\\frac{\\pi}{2}``)."""
    if not isinstance(x.value, sympy.Basic):
        return [x.value]
    out = [x.value]
    if x.percent:
        out.append(x.value / 100)
    g = gold.value if gold is not None else None
    if x.degrees and isinstance(g, sympy.Basic) and g.has(sympy.pi) and not x.value.has(sympy.pi):
        out.append(x.value * sympy.pi / 180)
    return out


def equivalent(
    gold: Parsed,
    pred: Parsed,
    *,
    precision_digits: int | None = None,
    test: IdentityTest | None = None,
) -> bool:
    """Whether ``pred`` answers the same as ``gold``, reading ``pred`` the way gold is written.

    Args:
        gold: the parsed gold answer.
        pred: the parsed predicted answer.
        precision_digits: the task's declared precision (significant digits); None (the
            default) compares numbers exactly.
        test: the identity test, carrying this check's seed (a fresh seed when None).

    Returns:
        True when equivalent.
    """
    if gold.text == pred.text and not isinstance(gold.value, str):
        return True  # the same normalised text
    approx = precision_digits is not None and (gold.decimal or pred.decimal)
    token = _TEST.set(test or IdentityTest(seed=secrets.token_bytes(16)))
    try:
        for g in _percent_variants(gold):
            for p in _percent_variants(pred, gold):
                if values_equal(g, p, digits=precision_digits or 0, approx=approx):
                    return True
        g, p = _imaginary(gold.value), _imaginary(pred.value)
        if g is not gold.value or p is not pred.value:  # i as the imaginary unit: i^4 = 1
            return values_equal(g, p, digits=precision_digits or 0, approx=approx)
        return False
    finally:
        _TEST.reset(token)
