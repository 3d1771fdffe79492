"""Immutable expression trees, exact evaluation and rendering.

Example:
    >>> from certd.domains.countdown import BinOp, Num, evaluate, render
    >>> e = BinOp("+", BinOp("*", BinOp("-", Num(25), Num(5)), Num(4)), Num(3))
    >>> render(e), evaluate(e)
    ('(25-5)*4+3', Fraction(83, 1))

Every traversal here is iterative, so a tree of any depth is safe to evaluate or render.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TypeAlias

from .errors import CountdownZeroDivisionError

__all__ = [
    "BinOp",
    "Expr",
    "Num",
    "Value",
    "apply",
    "divide",
    "evaluate",
    "first_op",
    "leaves",
    "normalise",
    "render",
    "value_of",
]

Value: TypeAlias = int | Fraction
"""An exact value: an ``int`` when integral, else a ``Fraction`` (internal fast path)."""


@dataclass(frozen=True, slots=True)
class Num:
    """A literal: a non-negative integer as written in the source.

    Raises:
        ValueError: when ``value`` is not a non-negative ``int``.
    """

    value: int

    def __post_init__(self) -> None:
        if type(self.value) is not int or self.value < 0:
            raise ValueError(f"Num needs a non-negative int, got {self.value!r}")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BinOp:
    """A binary operation ``left op right`` with ``op`` one of ``+ - * /``.

    Equality, hashing and ``repr`` are iterative, so trees of any depth compare safely.

    Raises:
        ValueError: when ``op`` is not one of ``+ - * /``.
    """

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in ("+", "-", "*", "/"):
            raise ValueError(f"BinOp needs an operator in '+-*/', got {self.op!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BinOp):
            return NotImplemented
        todo: list[tuple[Expr, Expr]] = [(self, other)]
        while todo:
            a, b = todo.pop()
            if a is b:
                continue
            if type(a) is BinOp and type(b) is BinOp:
                if a.op != b.op:
                    return False
                todo.append((a.right, b.right))
                todo.append((a.left, b.left))
            elif a != b:  # a literal against a literal or a node: never recursive
                return False
        return True

    def __hash__(self) -> int:
        return _hash(self)

    def __repr__(self) -> str:
        return _structure(self)


Expr: TypeAlias = Num | BinOp
"""An expression tree: a literal or a binary operation."""


def divide(a: Value, b: Value) -> Value:
    """Exact ``a / b`` for ``b != 0``, normalised to ``int`` when integral (internal)."""
    if type(a) is int and type(b) is int:
        q, r = divmod(a, b)
        return q if not r else Fraction(a, b)
    f = Fraction(a) / b
    return f.numerator if f.denominator == 1 else f


def normalise(x: Value) -> Value:
    """``x`` as an ``int`` when integral (internal)."""
    if type(x) is int:
        return x
    assert isinstance(x, Fraction)
    return x.numerator if x.denominator == 1 else x


def apply(op: str, a: Value, b: Value) -> Value:
    """``a op b`` exactly (internal).

    Raises:
        CountdownZeroDivisionError: when ``op`` is ``/`` and ``b`` is zero.
    """
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    else:
        if not b:
            raise CountdownZeroDivisionError("division by zero")
        return divide(a, b)
    return r if type(r) is int else normalise(r)


def value_of(expr: Expr) -> Value:
    """Exact value of ``expr`` as ``int`` or ``Fraction`` (internal fast path of evaluate)."""
    todo: list[Expr | str] = [expr]
    out: list[Value] = []
    while todo:
        item = todo.pop()
        if type(item) is str:
            b = out.pop()
            out[-1] = apply(item, out[-1], b)
        elif type(item) is Num:
            out.append(item.value)
        else:
            assert type(item) is BinOp
            todo.append(item.op)
            todo.append(item.right)
            todo.append(item.left)
    return out[0]


def evaluate(expr: Expr) -> Fraction:
    """Evaluate an expression with exact rational arithmetic.

    Args:
        expr: the expression tree.

    Raises:
        CountdownZeroDivisionError: when some division has a zero divisor.

    Returns:
        The exact value.
    """
    return Fraction(value_of(expr))


_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}
_LEAF_PREC = 3


def render(expr: Expr) -> str:
    """Render an expression with the fewest parentheses that keep its tree.

    Operators are written without spaces; ``parse_expression(render(e)) == e`` for every tree.

    Args:
        expr: the expression tree.

    Returns:
        The text, e.g. ``(25-5)*4+3``.
    """
    todo: list[Expr | str] = [expr]
    out: list[tuple[str, int]] = []
    while todo:
        item = todo.pop()
        if type(item) is str:
            right, rp = out.pop()
            left, lp = out[-1]
            p = _PREC[item]
            if lp < p:
                left = f"({left})"
            if rp <= p:
                right = f"({right})"
            out[-1] = (f"{left}{item}{right}", p)
        elif type(item) is Num:
            out.append((str(item.value), _LEAF_PREC))
        else:
            assert type(item) is BinOp
            todo.append(item.op)
            todo.append(item.right)
            todo.append(item.left)
    return out[0][0]


def _structure(expr: Expr) -> str:
    """``repr`` of a tree, e.g. ``BinOp('+', Num(value=1), Num(value=2))``, in linear time."""
    todo: list[Expr | str] = [expr]
    parts: list[str] = []
    while todo:
        item = todo.pop()
        if type(item) is str:
            parts.append(item)
        elif type(item) is Num:
            parts.append(repr(item))
        else:
            assert type(item) is BinOp
            todo += [")", item.right, ", ", item.left, f"BinOp({item.op!r}, "]
    return "".join(parts)


def _hash(expr: Expr) -> int:
    """A structural hash of a tree, computed iteratively."""
    todo: list[Expr | str] = [expr]
    out: list[int] = []
    while todo:
        item = todo.pop()
        if type(item) is str:
            right = out.pop()
            out[-1] = hash((item, out[-1], right))
        elif type(item) is Num:
            out.append(hash(item))
        else:
            assert type(item) is BinOp
            todo += [item.op, item.right, item.left]
    return out[0]


def leaves(expr: Expr) -> list[int]:
    """The literal values of ``expr``, left to right.

    Args:
        expr: the expression tree.

    Returns:
        The literals in source order.
    """
    todo: list[Expr] = [expr]
    out: list[int] = []
    while todo:
        item = todo.pop()
        if type(item) is Num:
            out.append(item.value)
        else:
            assert type(item) is BinOp
            todo.append(item.right)
            todo.append(item.left)
    return out


def first_op(expr: Expr) -> tuple[int, str]:
    """The leftmost literal and its parent's operator ("" for a bare literal).

    Args:
        expr: the expression tree.

    Returns:
        ``(operand, operator)``.
    """
    parent = ""
    node = expr
    while type(node) is BinOp:
        parent = node.op
        node = node.left
    assert type(node) is Num
    return node.value, parent
