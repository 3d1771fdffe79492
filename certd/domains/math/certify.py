"""A certified zero test at one point: interval arithmetic plus a magnitude pass.

Example:
    >>> import sympy
    >>> x = sympy.Symbol("x", real=True)
    >>> at = {x: sympy.Rational(3, 7)}
    >>> certify_at(sympy.sin(x) ** 2 + sympy.cos(x) ** 2 - 1, at)
    True
    >>> certify_at(sympy.sin(x + sympy.exp(-1000)) - sympy.sin(x), at) is None  # e^-1000: too small
    True
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

import math
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
]

MAGNITUDE_DIGITS = 50
BASE_DIGITS = 60
MAX_DIGITS = 3000

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


class _Pass:
    """One evaluation at ``digits`` digits, recording the magnitude of every subterm."""

    def __init__(self, point: dict[Any, Any], digits: int) -> None:
        self.ctx = MPIntervalContext()
        self.ctx.prec = int(digits * 3.33) + 16
        self.point = point
        self.lo = self.ctx.mpf(10) ** (-MAGNITUDE_DIGITS)
        self.hi = self.ctx.mpf(10) ** MAGNITUDE_DIGITS
        self.log_sum = 0.0
        self.nodes = 0

    def check(self, v: Any) -> Any:
        """A subterm's value: nonzero and within ``[10^-M, 10^M]`` in magnitude."""
        if 0 in v:
            raise _Undecided("a subterm's interval contains 0")
        m = abs(v)
        if m.a < self.lo or m.b > self.hi:
            raise _Undecided("a subterm outside the magnitude bound")
        self.log_sum += max(abs(math.log10(float(m.a))), abs(math.log10(float(m.b))))
        return v

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
            return c.exp(self.value(e.args[0]))
        if isinstance(e, sympy.log) and len(e.args) == 1:
            a = self.value(e.args[0])
            if not a.a > 0:
                raise _Undecided("log of a value not shown positive")
            return c.log(a)
        if isinstance(e, _TRIG):
            return self.trig(e, self.value(e.args[0]))
        if isinstance(e, _HYPERBOLIC):
            return self.hyperbolic(e, self.value(e.args[0]))
        raise _Undecided(f"unsupported function {type(e).__name__}")

    def power(self, e: Any) -> Any:
        c = self.ctx
        b, x = e.args
        if isinstance(x, sympy.Integer):
            return self.value(b) ** int(x)
        base = self.value(b)
        if base.a > 0:
            return c.exp(self.value(x) * c.log(base))
        if isinstance(x, sympy.Rational) and x.q % 2 == 1 and base.b < 0:
            odd = -c.exp(self.value(x) * c.log(-base))  # a real odd root of a negative base
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


def _literal_digits(expr: Any) -> int:
    total = 0
    for r in expr.atoms(sympy.Rational):
        total += len(str(abs(int(r.p)))) + len(str(int(r.q)))
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
        return None
    except (ValueError, TypeError, ZeroDivisionError, OverflowError, ArithmeticError):
        return None
