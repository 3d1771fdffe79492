"""The SymPy objects the fast reader builds, with the constructors and in the order of the
grammar's converter (``latex2sympy2_extended``'s ``_Latex2Sympy.convert_*`` and helpers).

Example:
    >>> from sympy import Symbol
    >>> x = Symbol("x")
    >>> _add_flat(_add_flat(x, 1), 2)  # flattened, unevaluated
    x + 1 + 2
    >>> _relate("<", _relate("<", 0, x), 1)  # a chain becomes And
    (0 < x) & (x < 1)
    >>> _set_or_tuple([[1, 2], [3, 4]])
    {(1, 2), (3, 4)}

Nothing here evaluates where the converter does not; ``_Decline`` is raised for a matrix
where the reader does not follow the converter (``_no_matrix``).
"""

from __future__ import annotations

from typing import Any

import sympy
from latex2sympy2_extended.logic import And
from latex2sympy2_extended.sets import FiniteSet

from ._lexer import _Decline

__all__ = [
    "_UNDECIDED",
    "_add_flat",
    "_divide",
    "_is_matrix",
    "_mat_add_flat",
    "_mat_mul_flat",
    "_mul_flat",
    "_no_matrix",
    "_number",
    "_relate",
    "_set_or_tuple",
    "_unary_minus",
]

# What SymPy raises when it refuses a construction (the grammar's converter then decides).
_UNDECIDED = (TypeError, ValueError, AttributeError, ArithmeticError, NotImplementedError)


def _is_matrix(x: Any) -> bool:
    return bool(getattr(x, "is_Matrix", False))


def _no_matrix(*xs: Any) -> None:
    if any(_is_matrix(x) for x in xs):
        raise _Decline("a matrix in an operation")


def _flat(op: Any, lh: Any, rh: Any) -> Any:
    """``op(lh, rh)`` unevaluated, a side that is itself an ``op`` spliced in: the converter's
    ``add_flat``, ``mul_flat``, ``mat_add_flat`` and ``mat_mul_flat``."""
    flag = f"is_{op.__name__}"
    left = lh.args if getattr(lh, flag, False) else (lh,)
    right = rh.args if getattr(rh, flag, False) else (rh,)
    return op(*left, *right, evaluate=False)


def _add_flat(lh: Any, rh: Any) -> Any:
    return _flat(sympy.Add, lh, rh)


def _mul_flat(lh: Any, rh: Any) -> Any:
    return _flat(sympy.Mul, lh, rh)


def _mat_add_flat(lh: Any, rh: Any) -> Any:
    """A sum with a matrix in it."""
    return _flat(sympy.MatAdd, lh, rh)


def _mat_mul_flat(lh: Any, rh: Any) -> Any:
    """A product with a matrix in it."""
    return _flat(sympy.MatMul, lh, rh)


def _divide(lh: Any, rh: Any) -> Any:
    _no_matrix(lh, rh)
    if getattr(lh, "is_Integer", False) and getattr(rh, "is_Integer", False):
        return sympy.Rational(lh, rh)
    return sympy.Mul(lh, sympy.Pow(rh, -1, evaluate=False), evaluate=False)


def _number(text: str) -> Any:
    """The converter's ``sympy.Number(text)`` for the lexer's ``\\d+(\\.\\d+)?``, built directly.

    ``sympy.Number`` of a string runs ``sympify`` (SymPy's parser, about 1.4 ms a number);
    for a digit string it gives ``Integer(int(text))`` and for a decimal ``Float(text)``, the
    same objects (``test_fastlatex`` compares ``srepr`` with the grammar's).
    """
    if text.isdigit():
        return sympy.Integer(int(text))
    return sympy.Float(text)


def _unary_minus(x: Any) -> Any:
    """The grammar's ``as_unary_minus`` (for ``±``)."""
    if getattr(x, "is_Rational", False):
        return sympy.Rational(-x.p, x.q)
    return sympy.Mul(-1, x, evaluate=False)


def _only_symbols(expr: Any) -> bool:
    """The converter's ``is_expr_of_only_symbols`` (what ``\\approx`` keeps or drops)."""
    if getattr(expr, "is_Symbol", False):
        return True
    if (
        getattr(expr, "is_Pow", False)
        and expr.args[1] == -1
        and (
            getattr(expr.args[0], "is_Symbol", False)
            or (hasattr(expr.args[0], "args") and all(_only_symbols(a) for a in expr.args[0].args))
        )
    ):
        return True
    args = getattr(expr, "args", ())
    if len(args) > 0:
        return all(_only_symbols(a) for a in args)
    return False


def _set_or_tuple(groups: list[list[Any]]) -> Any:
    """The converter's ``convert_elements_to_set_or_tuple`` over semicolon-separated groups
    of comma-separated elements."""
    if len(groups) == 1:
        return groups[0][0] if len(groups[0]) == 1 else FiniteSet(*groups[0])
    if all(len(g) == 1 for g in groups):
        return FiniteSet(*(g[0] for g in groups))
    return FiniteSet(*(sympy.Tuple(*g) for g in groups))


def _relate(op: str, lh: Any, rh: Any) -> Any:
    if op == "approx":  # the converter's reading: ``x \\approx 3`` is 3, ``2x \\approx 3`` is 2x
        return rh if _only_symbols(lh) else lh
    make = {
        "<": sympy.StrictLessThan,
        "<=": sympy.LessThan,
        ">": sympy.StrictGreaterThan,
        ">=": sympy.GreaterThan,
        "=": sympy.Eq,
        "!=": sympy.Ne,
    }[op]
    if isinstance(lh, And):
        return And(*lh._unsorted_args, make(lh._unsorted_args[-1].rhs, rh, evaluate=False))
    if isinstance(lh, sympy.core.relational.Relational):
        return And(lh, make(lh.rhs, rh, evaluate=False))
    return make(lh, rh, evaluate=False)
