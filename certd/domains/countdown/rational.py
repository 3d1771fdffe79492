"""Exact rationals as plain ints and int pairs, for the enumeration's hot loops (internal).

Example:
    >>> from certd.domains.countdown.rational import add, div, mul, sub
    >>> third = div(1, 3)
    >>> third, add(third, third), mul(third, 3), sub(third, third)
    ((1, 3), (2, 3), 1, 0)

A value is an ``int`` when integral, else a reduced ``(numerator, denominator)`` tuple with
``denominator > 1``. Every value has exactly one representation, so ``==`` and ``hash`` are the
built-in ones for ints and tuples of ints, several times cheaper than ``fractions.Fraction``'s.
"""

from __future__ import annotations

from math import gcd
from typing import TypeAlias

__all__ = ["Rat", "add", "div", "mul", "sub", "to_text"]

Rat: TypeAlias = int | tuple[int, int]
"""An exact rational: ``int``, or ``(n, d)`` reduced with ``d > 1``."""


def _make(n: int, d: int) -> Rat:
    # d > 0
    g = gcd(n, d)
    if g != 1:
        n //= g
        d //= g
    return n if d == 1 else (n, d)


def add(a: Rat, b: Rat) -> Rat:
    """``a + b``."""
    if isinstance(a, int):
        if isinstance(b, int):
            return a + b
        bn, bd = b
        return (a * bd + bn, bd)  # gcd(a*bd + bn, bd) = gcd(bn, bd) = 1
    an, ad = a
    if isinstance(b, int):
        return (an + b * ad, ad)
    bn, bd = b
    return _make(an * bd + bn * ad, ad * bd)


def sub(a: Rat, b: Rat) -> Rat:
    """``a - b``."""
    if isinstance(b, int):
        return a - b if isinstance(a, int) else add(a, -b)
    bn, bd = b
    return add(a, (-bn, bd))


def mul(a: Rat, b: Rat) -> Rat:
    """``a * b``."""
    if isinstance(a, int):
        if isinstance(b, int):
            return a * b
        a, b = b, a
    an, ad = a
    if isinstance(b, int):
        if not b:
            return 0
        g = gcd(b, ad)
        n, d = an * (b // g), ad // g
        return n if d == 1 else (n, d)
    bn, bd = b
    g1, g2 = gcd(an, bd), gcd(bn, ad)
    n, d = (an // g1) * (bn // g2), (ad // g2) * (bd // g1)
    return n if d == 1 else (n, d)


def div(a: Rat, b: Rat) -> Rat:
    """``a / b`` for ``b != 0``."""
    if isinstance(b, int):
        if isinstance(a, int):
            q, r = divmod(a, b)
            if not r:
                return q
            return _make(-a, -b) if b < 0 else _make(a, b)
        an, ad = a
        if b < 0:
            an, b = -an, -b
        g = gcd(an, b)
        return (an // g, ad * (b // g))  # the denominator only grew: still not integral
    bn, bd = b
    if bn < 0:
        bn, bd = -bn, -bd
    return mul(a, bd if bn == 1 else (bd, bn))


def to_text(a: Rat) -> str:
    """``a`` as ``n`` or ``n/d``."""
    return str(a) if isinstance(a, int) else f"{a[0]}/{a[1]}"
