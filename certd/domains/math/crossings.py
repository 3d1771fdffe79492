"""Sample points for integer-sensitive functions: integers, half-integers, crossings.

Example:
    >>> import sympy
    >>> x = sympy.Symbol("x", real=True)
    >>> pts = special_points(sympy.floor(x / 3 + sympy.Rational(1, 7)), {x}, lambda s: {})
    >>> sympy.Rational(-3, 7) in [p[x] for p in pts]   # x/3 + 1/7 = 0
    True

``floor(x)`` and ``ceil(x) - 1`` agree at every non-integer, so random points never tell
them apart; ``x + floor(1/(1+x^2))`` differs from ``x`` only at 0. The points here are where
such functions jump: every variable at the integers -3…3 and the half-integers between,
and, for an integer-sensitive function whose argument is a rational function of one
variable, the rational points where that argument equals an integer in -6…6 (``floor``,
``ceil``, ``frac``, ``mod``, factorial/gamma) or 0 (``sign``, ``Abs``, Heaviside, piecewise
conditions, ``max``/``min``). They refute quickly; a CORRECT verdict for such functions
still needs an exact proof (``identity.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import sympy
from sympy.polys.polyerrors import PolynomialError

from .certify import INTEGER_SENSITIVE

__all__ = ["special_points"]

_SPECIAL = [sympy.Integer(k) for k in range(-3, 4)] + [
    sympy.Rational(2 * k + 1, 2) for k in range(-3, 3)
]
_LEVELS = range(-6, 7)
_MAX_POINTS = 48


def _arguments(node: Any) -> list[Any]:
    """The quantities whose integer (or zero) crossings make ``node`` jump."""
    if isinstance(node, sympy.Piecewise):
        out = []
        for _, cond in node.args:
            for rel in cond.atoms(sympy.core.relational.Relational):
                out.append(rel.lhs - rel.rhs)
        return out
    if isinstance(node, sympy.Mod):
        return [node.args[0] / node.args[1]]
    if isinstance(node, sympy.Max | sympy.Min):
        args = list(node.args)
        return [a - b for i, a in enumerate(args) for b in args[i + 1 :]]
    return list(node.args[:1])


@functools.lru_cache(maxsize=1024)
def _crossings(arg: Any) -> tuple[tuple[Any, Any], ...]:
    """(symbol, rational value) where a one-variable rational ``arg`` meets a level.

    A pure function of ``arg`` (13 ``together`` and root findings, ~50 ms), kept per process:
    the same arguments recur within a difference (``floor(x) - ceil(x)``) and across answers
    (``x``, ``-x``, ``x/2``)."""
    free = arg.free_symbols
    if len(free) != 1:
        return ()
    (s,) = free
    if not arg.is_rational_function(s):
        return ()
    out: list[tuple[Any, Any]] = []
    for k in _LEVELS:
        num = sympy.numer(sympy.together(arg - k))
        try:
            poly = sympy.Poly(num, s)
        except PolynomialError:
            return tuple(out)
        if poly.degree() < 1 or poly.degree() > 6:
            continue
        for r in poly.ground_roots():
            out.append((s, sympy.Rational(r)))
    return tuple(out)


def special_points(
    diff: Any, free: set[Any], draw: Callable[[set[Any]], dict[Any, Any]]
) -> list[dict[Any, Any]]:
    """Points at which integer-sensitive functions jump (see the module docstring).

    Args:
        diff: the difference being tested.
        free: its free symbols.
        draw: a random point for ``free`` (the other variables at a crossing point).

    Returns:
        At most 48 points (symbol → rational).
    """
    points = [dict.fromkeys(free, v) for v in _SPECIAL]
    seen: set[tuple[Any, Any]] = set()
    for node in sympy.preorder_traversal(diff):
        if not isinstance(node, INTEGER_SENSITIVE):
            continue
        for arg in _arguments(node):
            for s, r in _crossings(arg):
                if (s, r) in seen or len(points) >= _MAX_POINTS:
                    continue
                seen.add((s, r))
                point = draw(free) if len(free) > 1 else {}
                point[s] = r
                points.append(point)
    return points
