"""Is a difference zero? Exact where SymPy can decide, a seeded random-point test otherwise.

Example:
    >>> import sympy
    >>> x = sympy.Symbol("x", real=True)
    >>> test = IdentityTest(seed=bytes(16))
    >>> test.is_zero(sympy.sin(x) ** 2 + sympy.cos(x) ** 2 - 1)
    True
    >>> test.is_zero(sympy.sin(10 * sympy.pi * x))   # vanishes on the lattice x = k/10 only
    False
    >>> test.is_zero(sympy.exp(-200))                 # no absolute threshold
    False

The rules (``docs/math-domain.md`` "Exactness" states them with their error bounds):

- **Rational numbers and rational functions are decided exactly**: a rational number is zero
  or not; a rational function is zero exactly when ``sympy.cancel`` gives 0.
- **Other constants** (radicals, π, e, logarithms …) are evaluated with SymPy's adaptive
  arbitrary-precision ``evalf(strict=True)``: a value it can bound away from zero to 30
  significant digits is nonzero (a *relative* bound: ``e^{-200}`` and ``2^{-200}`` are not
  0). A value that stays at 0 up to a working precision of ``100 + 2·D`` digits, where D is
  the number of digits of all the literals in the expression and of the integer parts of
  its numeric function arguments (at most 3,000), is then proved zero exactly (``simplify``,
  or the minimal polynomial of an algebraic number) or certified zero (``certify.py``, the
  same rule as for variables, at the one empty point); otherwise it is **not** equal.
- **Expressions in variables that are not rational functions** are tested at ``points``
  random points, drawn per check from HMAC-SHA256 keyed by ``seed`` (a CSPRNG; the seed is
  recorded in the verdict's ``detail`` so the check can be replayed). Each variable takes
  ``a/q`` with ``q`` a random prime in [2^63, 2^64) and ``a`` uniform in ``[-4q, 4q]``, not a
  multiple of ``q``: never an integer, never a dyadic or decimal fraction, so functions that
  vanish on a lattice (``\\sin(k\\pi x)`` vanishes only where ``q`` divides ``k``) do not pass.
  A point where the difference is shown nonzero makes it nonzero. It is zero only when it is
  **certified** zero at every point (``certify.py``: interval arithmetic and a magnitude pass,
  so no ``e^{-1000}`` can hide below the precision) or **proved** zero (``symbolic_zero``);
  a value that merely stays at 0 to a working precision decides nothing. Integer-sensitive
  functions (``floor``, ``Abs``, …) always need the proof, and get integer, half-integer and
  crossing points for refutation (``crossings.py``).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Any

import sympy
from sympy.core.evalf import PrecisionExhausted
from sympy.polys.polyerrors import NotAlgebraic, PolynomialError

from .certify import certify_at, integer_sensitive, overflows
from .crossings import special_points

__all__ = ["IdentityTest", "constant_zero", "literal_digits", "symbolic_zero"]

_ERRORS = (
    TypeError,
    ValueError,
    AttributeError,
    NotImplementedError,
    ZeroDivisionError,
    OverflowError,  # an answer's huge value (``e^{e^{100}}``): its verdict, never INFRA_ERROR
)
# The highest precision a constant is evaluated at: a value still 0 there needs a proof
# or a certificate (``certify.py``), so the cap costs no soundness, only time.
_MAX_WORKING = 3000
_CALCULUS = (sympy.Sum, sympy.Product, sympy.Integral, sympy.Limit, sympy.Derivative)


def literal_digits(expr: Any) -> int:
    """Decimal digits of all the rational literals in ``expr`` (numerators and denominators).

    Args:
        expr: a SymPy expression.

    Returns:
        The total, with the integer-part digits of every numeric function argument: an upper
        bound on how much cancellation the literals, and a huge argument's reduction, can hide.
    """
    total = 0
    for r in expr.atoms(sympy.Rational):
        total += int((abs(int(r.p)).bit_length() + int(r.q).bit_length()) * 0.30103) + 2
    for f in expr.atoms(sympy.Float):
        total += int(f._prec * 0.30103) + 2
    for call in expr.atoms(sympy.Function):
        total += sum(_magnitude_digits(arg) for arg in call.args)
    return total


def _magnitude_digits(arg: Any) -> int:
    """Decimal digits of a numeric function argument's integer part (0 if small or symbolic).

    ``\\sin(1000!\\,\\pi x)`` at ``x = a/q`` needs its argument to ~2,570 digits before the
    sine is known to any: the working precision must cover the argument's size, not only its
    literals (``1000`` is four digits; ``1000!`` is 2,568).
    """
    if arg.free_symbols or not isinstance(arg, sympy.Expr):
        return 0
    try:
        m = arg.evalf(15)
    except (*_ERRORS, PrecisionExhausted):
        return 0
    if not isinstance(m, sympy.Float) or m.is_zero or not m.is_finite:
        return 0
    digits = int(sympy.log(abs(m), 10).evalf(15))
    return digits + 2 if digits > 0 else 0


@dataclass(slots=True)
class IdentityTest:
    """One check's zero test: its seed, its random points, and what it found.

    Attributes:
        seed: the CSPRNG key (16 bytes or more), recorded in the verdict's detail.
        points: random points per expression in variables (the failure bound is per point).
        drawn: how many random points were drawn (the verdict's detail reports the seed
            when any was).
    """

    seed: bytes
    points: int = 6
    drawn: int = 0
    _counter: int = field(default=0, repr=False)

    def _int(self, bound: int) -> int:
        """A uniform integer in ``[0, bound)`` (rejection sampling on HMAC-SHA256 blocks)."""
        bits = max(1, bound.bit_length()) + 64
        while True:
            out = b""
            while len(out) * 8 < bits:
                self._counter += 1
                msg = self._counter.to_bytes(8, "big")
                out += hmac.new(self.seed, msg, hashlib.sha256).digest()
            n = int.from_bytes(out, "big") >> (len(out) * 8 - bits)
            limit = (1 << bits) - (1 << bits) % bound
            if n < limit:
                return n % bound

    def _prime(self) -> int:
        while True:
            q = (1 << 63) + self._int(1 << 63) | 1
            if _is_prime64(q):
                return q

    def draw(self, symbols: set[Any]) -> dict[Any, Any]:
        """One random point: each symbol → ``a/q``, ``q`` a fresh random 64-bit prime.

        Args:
            symbols: the free symbols.

        Returns:
            The substitution.
        """
        self.drawn += 1
        point = {}
        for s in sorted(symbols, key=sympy.default_sort_key):
            q = self._prime()
            a = 0
            while a % q == 0:
                a = self._int(8 * q + 1) - 4 * q
            point[s] = sympy.Rational(a, q)
        return point

    def is_zero(self, diff: Any) -> bool:
        """Whether ``diff`` is zero, under the rules of the module docstring.

        Args:
            diff: a SymPy expression or matrix (the difference of two answers).

        Returns:
            True when zero (exactly, or at every random point).
        """
        if isinstance(diff, sympy.MatrixBase):
            return all(self.is_zero(d) for d in diff)
        try:
            if diff == 0:
                return True
            if not isinstance(diff, sympy.Expr):
                return False
            if diff.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
                return False
            if diff.has(*_CALCULUS):
                diff = diff.doit()  # integrals, sums, limits: evaluated exactly (deadline-bound)
                if diff.has(*_CALCULUS):
                    return bool(sympy.expand(diff) == 0)  # still unevaluated: exact only
                if diff == 0:
                    return True
            free = diff.free_symbols
            if not free:
                return constant_zero(diff, proof=True) is True
            if not diff.has(sympy.Float) and diff.is_rational_function(*free):
                return bool(sympy.cancel(diff) == 0)  # exact: no sampling
            return self._sampled_zero(diff, free)
        except _ERRORS:
            return False

    def _sampled_zero(self, diff: Any, free: set[Any]) -> bool:
        """Certified at every point (``certify.py``), or proved exactly; never "looked like 0".

        A point where the difference is certified nonzero, or shown nonzero by SymPy's
        ``evalf(strict=True)``, makes it nonzero. Integer-sensitive functions add integer,
        half-integer and argument-crossing points and always need an exact proof.
        """
        sensitive = integer_sensitive(diff)
        points = [self.draw(free) for _ in range(self.points)]
        if sensitive:
            points += special_points(diff, free, self.draw)
        certified = True
        for point in points:
            at = certify_at(diff, point)
            if at is None:
                certified = False
                at = _refuted(diff, point)
            if at is False:
                return False  # nonzero at a point: never equal
        if certified and not sensitive:
            return True
        return symbolic_zero(diff)

    def nonconstant(self, a: Any, b: Any) -> bool:
        """Whether ``a / b`` clearly takes two different values at two random points.

        Args:
            a: numerator expression.
            b: denominator expression.

        Returns:
            True when the ratio is shown not to be constant; False when that cannot be told.
        """
        free = a.free_symbols | b.free_symbols
        if not free:
            return False
        ratio = a / b
        values = []
        for _ in range(2):
            pt = self.draw(free)
            try:
                v = sympy.N(ratio.xreplace(pt), 30)
            except _ERRORS:
                return False
            if not isinstance(v, sympy.Number) or v.has(sympy.zoo, sympy.nan):
                return False
            values.append(v)
        scale = max(1, abs(values[0]))
        return bool(abs(values[1] - values[0]) > sympy.Float(10, 5) ** -20 * scale)


def constant_zero(c: Any, *, proof: bool, working: int | None = None) -> bool | None:
    """Whether a constant is zero.

    Args:
        c: a SymPy expression without free symbols.
        proof: when the value stays at 0 to the working precision, require an exact proof
            (True for a constant answer; False at a random point of the identity test).
        working: the highest precision tried, in digits (default ``100 + 2·D``, D the digits
            of the literals of ``c``).

    Returns:
        True (zero), False (nonzero), None (not a number: a pole, ``zoo``, an unevaluated
        function).
    """
    if isinstance(c, sympy.Rational):
        return bool(c == 0)
    if not isinstance(c, sympy.Expr) or c.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
        return None
    if overflows(c):
        return None  # e^{e^{10^5}}: not evaluated (docs/math-domain.md, "Exactness")
    if working is None:
        working = min(100 + 2 * literal_digits(c), _MAX_WORKING)
    try:
        v = c.evalf(30, strict=True, maxn=working)
    except PrecisionExhausted:
        v = sympy.Integer(0)
    except _ERRORS:
        return None
    if not v.is_number or v.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
        return None
    if v.free_symbols or not all(isinstance(part, sympy.Number) for part in v.as_real_imag()):
        return None
    if v != 0:
        return False
    if not proof:
        return True
    return _proved_zero(c) or certify_at(c, {}) is True


def _refuted(diff: Any, point: dict[Any, Any]) -> bool | None:
    """False when SymPy's exact substitution and ``evalf(strict=True)`` show ``diff``
    nonzero at ``point``; None otherwise (a value that stays at 0 decides nothing)."""
    try:
        at = constant_zero(diff.xreplace(point), proof=False)
    except _ERRORS:
        return None
    return False if at is False else None


def symbolic_zero(diff: Any) -> bool:
    """Whether SymPy proves ``diff`` zero (``cancel``, ``expand``, then ``simplify``).

    Args:
        diff: a SymPy expression.

    Returns:
        True only on an exact proof.
    """
    try:
        if sympy.cancel(diff) == 0 or sympy.expand(diff) == 0:
            return True
        if diff.has(sympy.ceiling, sympy.frac):  # one function for the jumps: ceil(x) = -floor(-x)
            if sympy.expand(diff.rewrite(sympy.floor)) == 0:
                return True
        return bool(sympy.simplify(diff) == 0)
    except _ERRORS:
        return False
    except (PolynomialError, RecursionError):
        return False


_SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def _is_prime64(n: int) -> bool:
    """Deterministic Miller-Rabin for n < 2^64 (these 12 bases suffice below 3.3·10^24)."""
    if n < 2:
        return False
    for p in _SMALL_PRIMES:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for a in _SMALL_PRIMES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _proved_zero(c: Any) -> bool:
    """An exact proof that the constant ``c`` is 0 (it is already numerically 0)."""
    try:
        if c.doit() == 0 or sympy.cancel(c) == 0 or c.is_zero is True:
            return True  # unevaluated powers and products of the parser, evaluated exactly
        if sympy.simplify(c) == 0:
            return True
        if c.is_algebraic is True:
            x = sympy.Dummy("x")
            return bool(sympy.minimal_polynomial(c, x) == x)
    except _ERRORS:
        return False
    except (PolynomialError, NotAlgebraic):
        return False
    return False
