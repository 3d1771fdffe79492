"""The fast reader's expressions: sums, products (explicit, implicit and mixed numbers),
quotients, unary signs, factorials and powers, down to the atoms ``comp`` reads.

Example:
    >>> from certd.domains.math.fastlatex._top import _Reader
    >>> _Reader(r"x^2 y - 2\\frac{1}{2}", is_real=True).expr()  # a mixed number: 5/2
    x**2*y - 5/2

The precedence, loosest first: additive > mp (``* / :``) > unary > postfix list (implicit
product) > postfix (``!``) > exp (``^``) > comp, as the grammar's rules of the same names.
"""

from __future__ import annotations

from typing import Any

import sympy
from latex2sympy2_extended.symbols import get_symbol

from ._build import (
    _add_flat,
    _divide,
    _is_matrix,
    _mat_add_flat,
    _mat_mul_flat,
    _mul_flat,
    _no_matrix,
    _number,
)
from ._lexer import _Cursor, _Decline

__all__ = ["_ExprReader"]


class _ExprReader(_Cursor):
    """Expressions over the cursor; ``comp`` (one atom) is the subclass's hook."""

    def comp(self) -> Any:
        """One atom (a number, a name, a bracket, a function…): ``_AtomReader.comp``."""
        raise NotImplementedError

    def expr(self) -> Any:
        value = self.mp()
        while self.kind in ("+", "-"):
            op = self.kind
            self.i += 1
            rh = self.mp()
            if _is_matrix(value) or _is_matrix(rh):
                value = _mat_add_flat(value, rh if op == "+" else _mat_mul_flat(-1, rh))
                continue
            if op == "-":
                rh = -rh if rh.func.is_Number else _mul_flat(-1, rh)
            value = _add_flat(value, rh)
        return value

    def mp(self) -> Any:
        value = self.unary()
        while self.kind in ("*", "/", ":"):
            op = self.kind
            self.i += 1
            rh = self.unary()
            if op == "*" and (_is_matrix(value) or _is_matrix(rh)):
                value = _mat_mul_flat(value, rh)
            elif op == "*":
                value = _mul_flat(value, rh)
            else:
                value = _divide(value, rh)
        return value

    def unary(self) -> Any:
        if self.kind == "+":
            self.i += 1
            return self.unary()
        if self.kind == "-":
            self.i += 1
            inner = self.unary()
            if _is_matrix(inner):
                return _mat_mul_flat(-1, inner)
            if getattr(inner, "func", None) is not None and inner.func.is_Number:
                return -inner
            return _mul_flat(-1, inner)
        parts = [self.postfix()]
        while self.starts_factor():
            parts.append(self.postfix())
        return self._postfix_list(parts)

    def _postfix_list(self, parts: list[Any]) -> Any:
        res = parts[0]
        if len(parts) == 1:
            return res
        rh = self._postfix_list(parts[1:])
        if _is_matrix(res) or _is_matrix(rh):
            return _mat_mul_flat(res, rh)
        if (
            getattr(res, "is_Integer", False)
            and getattr(rh, "is_Rational", False)
            and rh.p > 0
            and rh.q > 0
        ):
            if res < 0:
                return sympy.Rational(res * rh.q - rh.p, rh.q)
            return sympy.Rational(res * rh.q + rh.p, rh.q)
        return _mul_flat(res, rh)

    def postfix(self) -> Any:
        value = self.exp()
        while self.kind == "!":
            self.i += 1
            _no_matrix(value)
            value = sympy.factorial(value, evaluate=False)
        return value

    def exp(self) -> Any:
        base = self.comp()
        if self.kind == "^":
            self.i += 1
            _no_matrix(base)
            base = sympy.Pow(base, self._exponent(), evaluate=False)
            if self.kind == "^":
                raise _Decline("a chained power")
        return base

    def _exponent(self) -> Any:
        k = self.kind
        if k == "{":
            self.i += 1
            value = self.expr()
            self.take("}")
            _no_matrix(value)
            return value
        if k == "num":
            text = self.take("num")
            if "." in text:
                raise _Decline("a decimal exponent without braces")
            return _number(text)
        if k == "letter" and self.toks[self.i][1] != "e":
            return self._symbol(self.take("letter"), "")
        raise _Decline(f"exponent {k}")

    def _symbol(self, text: str, subscript: str) -> Any:
        return get_symbol(text + subscript, self.is_real, True)

    def _braced(self) -> Any:
        self.take("{")
        value = self.expr()
        self.take("}")
        return value
