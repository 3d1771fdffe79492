"""A certified zero test at one point: interval arithmetic plus a magnitude pass.

Example:
    >>> import sympy
    >>> x = sympy.Symbol("x", real=True)
    >>> at = {x: sympy.Rational(3, 7)}
    >>> certify_at(sympy.sin(x) ** 2 + sympy.cos(x) ** 2 - 1, at)
    True
    >>> certify_at(sympy.sqrt(x**4 + sympy.exp(-10**4)) - x**2, at) is None  # e^-10^4: too small
    True
    >>> certify_at(sympy.sin(x + sympy.exp(-1000)) - sympy.sin(x), at)  # refuted at ~900 digits
    False
    >>> certify_at(sympy.exp(x) - x, at)
    False

``certify_at`` evaluates a SymPy expression at a rational point with mpmath's interval
arithmetic (``mpmath.iv``: every operation rounds outward, so the true value lies in the
interval returned). It answers:

- **False** (certified nonzero): the interval excludes 0.
- **True** (certified zero): the interval contains 0, and the *magnitude pass* holds: every
  proper subterm of the expression (and the hidden ``e^{y}`` inside a hyperbolic function)
  has a value whose interval excludes 0 and lies in ``[10^-M, 10^M]`` (``M =
  MAGNITUDE_DIGITS``), and the final interval is narrower than ``10^-Z``, ``Z = BASE_DIGITS +
  2·D + 2·S + n``, where D is the digits of the literals, S the sum over subterms of
  ``|log10 |value||`` and n the node count (the evaluation runs at ``Z + S + BASE_DIGITS``
  digits). No subterm can then be smaller than what that precision resolves, so a nonzero
  difference built from them cannot hide below it (the zero-bound hypothesis that
  docs/math-domain.md "Exactness" states: a difference of such terms that is not 0 is not
  smaller than ``10^-Z``; a nested exponential such as ``e^{-1000}`` or
  ``\\tanh(x^2+1000)`` breaks the magnitude bound and is never certified).
- **None** (undecided): a subterm outside the bound, a function outside the supported set
  (integer-sensitive ones included), a complex or undefined intermediate value, or a
  precision over ``MAX_DIGITS``. The caller then needs an exact proof.
"""

from __future__ import annotations

import threading
from typing import Any

import sympy
from mpmath.ctx_iv import MPIntervalContext

__all__ = [
    "BASE_DIGITS",
    "INTEGER_SENSITIVE",
    "MAGNITUDE_DIGITS",
    "MAX_DIGITS",
    "certify_at",
    "integer_sensitive",
    "overflows",
]

MAGNITUDE_DIGITS = 50
BASE_DIGITS = 60
MAX_DIGITS = 3000
REFUTE_DIGITS = 2_500

INTEGER_SENSITIVE: tuple[Any, ...] = (
    sympy.floor,
    sympy.ceiling,
    sympy.frac,
    sympy.Mod,
    sympy.sign,
    sympy.Abs,
    sympy.Heaviside,
    sympy.Piecewise,
    sympy.factorial,
    sympy.factorial2,
    sympy.gamma,
    sympy.binomial,
    sympy.RisingFactorial,
    sympy.FallingFactorial,
    sympy.Max,
    sympy.Min,
    sympy.DiracDelta,
    sympy.KroneckerDelta,
)


def integer_sensitive(expr: Any) -> bool:
    """Whether ``expr`` uses a function that jumps, or is defined differently, at integers
    or at 0 (``floor``, ``ceil``, ``mod``, ``sign``, ``Abs``, Heaviside, piecewise, ``frac``,
    factorial/gamma, ``max``/``min``)."""
    return bool(expr.has(*INTEGER_SENSITIVE))


class _Undecided(Exception):
    """Internal: the pass cannot certify at this point."""


_HYPERBOLIC = (sympy.sinh, sympy.cosh, sympy.tanh, sympy.coth, sympy.sech, sympy.csch)
_TRIG = (sympy.sin, sympy.cos, sympy.tan, sympy.cot, sympy.sec, sympy.csc)


_CONTEXTS = threading.local()


def _context(digits: int) -> Any:
    """This thread's interval context, set to ``digits`` digits.

    Building an ``MPIntervalContext`` costs about a millisecond (a third of a certification
    at a point), so each thread keeps one. Passes in a thread run one after another and the
    values of a finished pass are not used again, so one context serves them all: a value
    keeps its endpoints, only new operations take the new precision.
    """
    ctx = getattr(_CONTEXTS, "ctx", None)
    if ctx is None:
        ctx = _CONTEXTS.ctx = MPIntervalContext()
    ctx.prec = int(digits * 3.33) + 16
    return ctx


class _Pass:
    """One evaluation at ``digits`` digits, recording the magnitude of every subterm."""

    def __init__(self, point: dict[Any, Any], digits: int, *, strict: bool = True) -> None:
        self.strict = strict
        self.largest = 0.0
        self.ctx = _context(digits)
        self.point = point
        self.lo = self.ctx.mpf(10) ** (-MAGNITUDE_DIGITS)
        self.hi = self.ctx.mpf(10) ** MAGNITUDE_DIGITS
        self.log_sum = 0.0
        self.nodes = 0
        self.limit = self.hi
        self.overflow = False

    def check(self, v: Any) -> Any:
        """A subterm's value: nonzero and within ``[10^-M, 10^M]`` in magnitude (when not
        ``strict``, only the largest ``|log10 |value||`` is recorded)."""
        m = abs(v)
        low, high = _log10(m._mpi_[0]), _log10(m._mpi_[1])
        if not self.strict:
            self.largest = max(self.largest, abs(low), abs(high))
            return v
        if 0 in v:
            raise _Undecided("a subterm's interval contains 0")
        if m.a < self.lo or m.b > self.hi:
            raise _Undecided("a subterm outside the magnitude bound")
        self.log_sum += max(abs(low), abs(high))
        return v

    def bounded(self, a: Any) -> Any:
        """The argument of ``exp`` or a trigonometric function, at most ``10^M`` in size
        (past it, ``e^{e^{1000}}`` would take mpmath unbounded time)."""
        if not abs(a).b <= self.limit:
            self.overflow = True
            raise _Undecided("an exponent or angle over the magnitude bound")
        return a

    def literal(self, e: Any) -> Any:
        c = self.ctx
        if isinstance(e, sympy.Integer):
            return c.mpf(int(e))
        if isinstance(e, sympy.Rational):
            return c.mpf(int(e.p)) / c.mpf(int(e.q))
        if isinstance(e, sympy.Float):
            return c.mpf(e._mpf_)
        if e is sympy.pi:
            return c.pi
        if e is sympy.E:
            return c.e
        raise _Undecided(f"unsupported constant {type(e).__name__}")

    def value(self, e: Any, root: bool = False) -> Any:
        self.nodes += 1
        if self.nodes > 4000:
            raise _Undecided("too many nodes")
        if e.is_Number or e in (sympy.pi, sympy.E):
            return self.literal(e)
        if isinstance(e, sympy.Symbol):
            if e not in self.point:
                raise _Undecided("a symbol without a value")
            v = self.literal(self.point[e])
        else:
            v = self.compound(e)
        return v if root else self.check(v)

    def compound(self, e: Any) -> Any:
        c = self.ctx
        if isinstance(e, sympy.Add):
            total = c.mpf(0)
            for a in e.args:
                total = total + self.value(a)
            return total
        if isinstance(e, sympy.Mul):
            prod = c.mpf(1)
            for a in e.args:
                prod = prod * self.value(a)
            return prod
        if isinstance(e, sympy.Pow):
            return self.power(e)
        if isinstance(e, sympy.exp):
            return c.exp(self.bounded(self.value(e.args[0])))
        if isinstance(e, sympy.log) and len(e.args) == 1:
            a = self.value(e.args[0])
            if not a.a > 0:
                raise _Undecided("log of a value not shown positive")
            return c.log(a)
        if isinstance(e, _TRIG):
            return self.trig(e, self.bounded(self.value(e.args[0])))
        if isinstance(e, _HYPERBOLIC):
            return self.hyperbolic(e, self.bounded(self.value(e.args[0])))
        raise _Undecided(f"unsupported function {type(e).__name__}")

    def power(self, e: Any) -> Any:
        c = self.ctx
        b, x = e.args
        if isinstance(x, sympy.Integer):
            return self.value(b) ** int(x)
        base = self.value(b)
        if base.a > 0:
            return c.exp(self.bounded(self.value(x) * c.log(base)))
        if isinstance(x, sympy.Rational) and x.q % 2 == 1 and base.b < 0:
            # a real odd root of a negative base
            odd = -c.exp(self.bounded(self.value(x) * c.log(-base)))
            return odd if x.p % 2 else -odd
        raise _Undecided("a power of a value not shown positive")

    def trig(self, e: Any, a: Any) -> Any:
        c = self.ctx
        s, k = c.sin(a), c.cos(a)
        if isinstance(e, sympy.sin):
            return s
        if isinstance(e, sympy.cos):
            return k
        den = {sympy.tan: k, sympy.cot: s, sympy.sec: k, sympy.csc: s}[type(e)]
        self.check(den)
        num = {sympy.tan: s, sympy.cot: k}.get(type(e), c.mpf(1))
        return num / den

    def hyperbolic(self, e: Any, a: Any) -> Any:
        u = self.check(self.ctx.exp(a))  # the hidden e^y: tanh(y) is 1 - 2/(e^{2y}+1)
        w = self.ctx.mpf(1) / u
        plus, minus = (u + w) / 2, (u - w) / 2
        if isinstance(e, sympy.cosh):
            return plus
        if isinstance(e, sympy.sinh):
            return minus
        if isinstance(e, sympy.sech):
            return 1 / plus
        self.check(minus)
        if isinstance(e, sympy.csch):
            return 1 / minus
        return minus / plus if isinstance(e, sympy.tanh) else plus / minus


def _log10(raw: Any) -> float:
    """About ``log10 |x|`` of a raw mpf tuple, from its exponent and bit count (0 for 0 and
    for infinities, which the caller's interval tests catch)."""
    _, man, exp, bc = raw
    if not man or not isinstance(exp, int):
        return 0.0
    return float((exp + bc) * 0.30103)


def _literal_digits(expr: Any) -> int:
    total = 0
    for r in expr.atoms(sympy.Rational):
        total += int((abs(int(r.p)).bit_length() + int(r.q).bit_length()) * 0.30103) + 2
    for f in expr.atoms(sympy.Float):
        total += int(f._prec * 0.30103) + 2
    return total


def certify_at(expr: Any, point: dict[Any, Any]) -> bool | None:
    """Whether ``expr`` is certified zero (True), certified nonzero (False) or undecided
    (None) at ``point``, under the rule of the module docstring.

    Args:
        expr: a SymPy expression whose free symbols all have values in ``point``.
        point: symbol → rational value (empty for a constant).

    Returns:
        True, False or None.
    """
    try:
        first = _Pass(point, BASE_DIGITS)
        v = first.value(expr, root=True)
        if 0 not in v:
            return False
        log_sum = int(first.log_sum) + 1
        zero_bound = BASE_DIGITS + 2 * _literal_digits(expr) + 2 * log_sum + first.nodes
        digits = zero_bound + log_sum + BASE_DIGITS
        if digits > MAX_DIGITS:
            return None
        final = _Pass(point, digits)
        v = final.value(expr, root=True)
        if 0 not in v:
            return False
        return bool(v.delta.b <= final.ctx.mpf(10) ** (-zero_bound)) or None
    except _Undecided:
        return _refute(expr, point)
    except (ValueError, TypeError, ZeroDivisionError, OverflowError, ArithmeticError):
        return None


def overflows(expr: Any, digits: int = 5) -> bool:
    """Whether a constant has an exponent or angle over ``10^digits`` in size, where
    SymPy's ``evalf`` would spend unbounded time (``e^{-e^{91304}}``).

    Args:
        expr: a SymPy expression without free symbols.
        digits: the size bound, in decimal digits.

    Returns:
        True when such an exponent is found.
    """
    p = _Pass({}, 30, strict=False)
    p.limit = p.ctx.mpf(10) ** digits
    try:
        p.value(expr, root=True)
    except (_Undecided, ValueError, TypeError, ZeroDivisionError, ArithmeticError):
        pass
    return p.overflow


def _refute(expr: Any, point: dict[Any, Any]) -> bool | None:
    """False when an evaluation at a precision past the smallest and largest subterm (up to
    ``REFUTE_DIGITS``) excludes 0: ``sin(x + e^{-1000})`` is refuted at ~900 digits."""
    try:
        first = _Pass(point, BASE_DIGITS, strict=False)
        if 0 not in first.value(expr, root=True):
            return False
        digits = BASE_DIGITS + 2 * _literal_digits(expr) + 2 * int(first.largest)
        if digits > REFUTE_DIGITS:
            return None
        return False if 0 not in _Pass(point, digits, strict=False).value(expr, root=True) else None
    except (_Undecided, ValueError, TypeError, ZeroDivisionError, ArithmeticError):
        return None
