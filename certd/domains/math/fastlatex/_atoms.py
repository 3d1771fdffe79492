"""The fast reader's atoms: numbers (and their dropped base subscripts), names and their
subscripts, ``e``, calls ``f(x)``, ``\\frac``, ``\\sqrt``, ``|…|``, ``\\sin``-family functions,
``\\log``, ``\\sum``/``\\prod`` and matrices, as the grammar's converter builds them.

Example:
    >>> from certd.domains.math.fastlatex._top import _Reader
    >>> _Reader(r"f(2)", is_real=True).comp()  # a letter applied to one atom is a call
    f(2)
    >>> _Reader(r"\\sin^2 x", is_real=True).comp()
    sin(x)**2
    >>> _Reader(r"204_5", is_real=True).comp()  # the base subscript is dropped
    204
"""

from __future__ import annotations

from typing import Any

import sympy
from latex2sympy2_extended.symbols import get_symbol

from ._build import _divide, _no_matrix, _number
from ._expr import _ExprReader
from ._lexer import _AFTER_ABS, _ENDS_TERM, _HYPERBOLIC, _TRIG, _Decline

__all__ = ["_AtomReader"]


class _AtomReader(_ExprReader):
    """Atoms, functions and matrices: what ``comp`` reads."""

    def comp(self) -> Any:
        k = self.kind
        if k == "num":
            text = self.take("num")
            if self.kind == "_":
                self._number_subscript()
            return _number(text)
        if k == "letter" and self.toks[self.i][1] == "e":
            return self._euler()
        if k == "letter":
            letter = self.take("letter")
            subscript = self._subscript()
            if self._is_call():
                if subscript:
                    raise _Decline("a subscripted name applied to an atom")
                return self._call(letter)
            return self._symbol(letter, subscript)
        if k == "bar":
            return self._abs()
        if k == "greek":
            return self._greek()
        if k == "pi":
            self.i += 1
            if self._is_call():
                raise _Decline("\\pi applied to an atom")
            return get_symbol("\\pi", self.is_real, True)
        if k == "infty":
            self.i += 1
            if self._is_call():
                raise _Decline("\\infty applied to an atom")
            return sympy.oo
        if k == "(":
            self.i += 1
            value = self.expr()
            self.take(")")
            return value
        if k in ("lfloor", "lceil"):
            return self._rounding()
        if k == "frac":
            self.i += 1
            top = self._braced()
            bottom = self._braced()
            return _divide(top, bottom)
        if k == "sqrt":
            return self._sqrt()
        if k == "begin":
            return self.matrix()
        if k == "func":
            return self.function()
        if k == "sum":
            return self.sum()
        raise _Decline(f"unexpected {k}")

    def _greek(self) -> Any:
        """A Greek letter: a symbol, never subscripted or applied to an atom."""
        name = self.take("greek")
        if self.kind == "_":
            raise _Decline("a Greek letter with a subscript")
        if self._is_call():
            raise _Decline("a Greek letter applied to an atom")
        return self._symbol(name, "")

    def _rounding(self) -> Any:
        """``\\lfloor x\\rfloor``, ``\\lceil x\\rceil``: the grammar's ``floor_group`` and
        ``ceil_group`` (an ``expr`` between the two, as in parentheses), unevaluated."""
        floor = self.take(self.kind) == "\\lfloor"
        value = self.expr()
        self.take("rfloor" if floor else "rceil")
        _no_matrix(value)
        return (sympy.floor if floor else sympy.ceiling)(value, evaluate=False)

    def _sqrt(self) -> Any:
        """``\\sqrt{x}`` or ``\\sqrt[n]{x}``, unevaluated."""
        self.i += 1
        root = None
        if self.kind == "[":
            self.i += 1
            root = self.expr()
            self.take("]")
            _no_matrix(root)
        base = self._braced()
        _no_matrix(base)
        if root is None:
            return sympy.Pow(base, sympy.S.Half, evaluate=False)
        return sympy.Pow(base, 1 / root, evaluate=False)

    def _subscript(self) -> str:
        if self.kind != "_":
            return ""
        self.i += 1
        if self.kind == "{":
            self.i += 1
            text = ""  # the grammar's symbol name: the subscript's tokens, without spaces
            while self.kind in ("num", "letter", "+", "-"):
                text += self.toks[self.i][1]
                self.i += 1
            self.take("}")
            if not text:
                raise _Decline("empty subscript")
        elif self.kind == "num" and len(self.toks[self.i][1]) == 1:
            text = self.take("num")
        elif self.kind == "letter" and self.toks[self.i][1] != "e":  # ``e`` is no atom there
            text = self.take("letter")
        else:
            raise _Decline("subscript")
        return f"_{{{text}}}" if len(text) > 1 else f"_{text}"

    def function(self) -> Any:
        """``\\sin(x)``, ``\\sin^2(x)``, ``\\sin^{-1}(x)``, ``\\ln(x)``, ``\\log_2(8)``, and
        the same with a lone atom for argument (``\\sin x``, ``\\log_2 8``), as the grammar's
        ``convert_func`` builds them."""
        name = self.take("func")
        base: Any = None
        if name in ("ln", "log"):
            base = sympy.E if name == "ln" else 10
            if self.kind == "_":
                self.i += 1
                base = self._braced() if self.kind == "{" else self._atom_only()
                if name == "ln":
                    raise _Decline("a subscript on ln")
        power: Any = None
        if self.kind == "^":
            self.i += 1
            power = self._exponent()
        if self.kind == "(":
            self.i += 1
            arg = self.expr()
            self.take(")")
        else:
            arg = self._atom_only()
            # The bare argument is a product without functions (``mp_nofunc``): it ends at
            # the next function (``2\\sin b \\cos a``) and must end here otherwise.
            ends = self.kind in ("func", "sqrt")
            if not ends and (self.starts_factor() or self.kind in ("^", "_", "!", "*", "/", ":")):
                raise _Decline("a function argument without parentheses")
        _no_matrix(arg)
        if name in _TRIG or name in _HYPERBOLIC:
            if power == -1:
                name, power = "a" + name, None
            value = getattr(sympy, name)(arg, evaluate=False)
        elif name.startswith("arc"):
            value = getattr(sympy, "a" + name[3:])(arg, evaluate=False)
        elif name == "exp":
            value = sympy.exp(arg, evaluate=False)
        else:
            value = sympy.log(arg, base, evaluate=False)
        if power:
            value = sympy.Pow(value, power, evaluate=False)
        return value

    def _atom_only(self) -> Any:
        """A number, a letter or a Greek letter alone (a subscript base or a bare argument)."""
        k = self.kind
        if k == "num":
            return _number(self.take("num"))
        if k == "letter" and self.toks[self.i][1] != "e":
            return self._symbol(self.take("letter"), "")
        if k == "greek":
            return self._symbol(self.take("greek"), "")
        if k == "pi":
            self.i += 1
            return get_symbol("\\pi", self.is_real, True)
        raise _Decline(f"{k} where an atom was expected")

    def sum(self) -> Any:
        """``\\sum_{k=a}^{b} body`` (the body is a product chain), as ``handle_sum_or_prod``."""
        name = self.take("sum")
        self.take("_")
        self.take("{")
        var = self.expr()
        if self.take("rel") != "=":
            raise _Decline("a sum's subscript is not k = a")
        start = self.expr()
        self.take("}")
        self.take("^")
        end = self._braced() if self.kind == "{" else self._atom_only()
        body = self.mp()
        _no_matrix(var, start, end, body)
        make = sympy.Sum if name == "sum" else sympy.Product
        return make(body, (var, start, end))

    def _euler(self) -> Any:
        """``e`` is Euler's number and ``e^{x}`` is ``exp(x)``, evaluated, as the grammar's
        ``handle_exp`` builds them."""
        self.take("letter")
        arg: Any = 1
        if self.kind == "_":
            raise _Decline("e with a subscript")
        if self.kind == "^":
            self.i += 1
            arg = self._exponent()
            if self.kind == "^":
                raise _Decline("a chained power of e")
        if self.kind == "(":
            raise _Decline("e applied to parentheses")
        return sympy.exp(arg)

    def _is_call(self) -> bool:
        """A name directly before ``(`` (or ``^…(``) is applied as a function when the
        parentheses hold one atom or a comma (the grammar's ``func_common_args``):
        ``f(x)``, ``f(2)``, ``f^2(x)`` are calls, ``x(x+1)`` and ``f(-1)`` products.

        Raises:
            _Decline: a comma in the parentheses (several arguments), or a shape not sorted.
        """
        j = self.i
        if self.toks[j][0] == "^":
            j = self._script_end(j + 1)
        if self.toks[j][0] != "(":
            return False
        close = self._closer(j)
        depth = 0
        for kind, _ in self.toks[j + 1 : close]:
            depth += (kind in self._OPEN) - (kind in self._CLOSE)
            if kind == "," and depth == 0:
                raise _Decline("a name applied to several arguments")
        kind, value = self.toks[j + 1]
        end = j + 2
        if kind == "num" and self.toks[end][0] == "_":
            end = self._script_end(end + 1)
        elif kind in ("letter", "greek", "pi") and value != "e":
            seen: set[str] = set()
            while self.toks[end][0] in ("_", "^") and self.toks[end][0] not in seen:
                seen.add(self.toks[end][0])
                end = self._script_end(end + 1)
        elif kind not in ("num", "infty"):
            return False
        return end == close

    def _call(self, name: str) -> Any:
        """``f(x)``, ``f^2(x)``: ``Function(name)(atom)``, raised to the power if one is
        written, as the converter's ``convert_func`` builds an applied name."""
        power: Any = None
        if self.kind == "^":
            self.i += 1
            power = self._exponent()
        self.take("(")
        arg = self.exp()
        self.take(")")
        _no_matrix(arg)
        value = sympy.Function(name)(arg)
        if power is not None:
            if self.kind == "^":
                raise _Decline("a power of a powered call")
            value = sympy.Pow(value, power, evaluate=False)
        return value

    def _number_subscript(self) -> None:
        """``204_5``, ``12_{10}``: the grammar reads the number and drops the subscript."""
        self.take("_")
        if self.kind == "{":
            self._braced()
        elif self.kind == "num" or (self.kind == "letter" and self.toks[self.i][1] != "e"):
            self.i += 1
        else:
            raise _Decline("a number's subscript")
        if self.kind not in _ENDS_TERM:
            raise _Decline("a number's subscript followed by more")

    def _abs(self) -> Any:
        """``|x|``: ``Abs(x)``, unevaluated. Nested bars, and a closing bar that more bars
        follow where it could also open one (``|a|b|c|``), are the grammar's to read."""
        if self.in_abs:
            raise _Decline("nested |…|")
        self.take("bar")
        self.in_abs = True
        value = self.expr()
        self.in_abs = False
        self.take("bar")
        _no_matrix(value)
        more = any(kind == "bar" for kind, _ in self.toks[self.i :])
        if more and self.kind not in _AFTER_ABS:
            # ``|x|+|y|`` and ``|x|^2`` are safe; ``|a|-b|c|`` is |a·|-b|·c| to the grammar,
            # and ``|x|^{2}…|`` could hold an evaluation bar ``x|^{2}``.
            after = self.toks[self.i + 1][0]
            sign_then_bar = self.kind in ("+", "-") and after == "bar"
            if not (sign_then_bar or (self.kind == "^" and after != "{")):
                raise _Decline("a closing | that could open another")
        return sympy.Abs(value, evaluate=False)

    def matrix(self) -> Any:
        name = self.take("begin")
        rows: list[list[Any]] = [[]]
        while True:
            cell = self.expr()
            _no_matrix(cell)
            rows[-1].append(cell)
            if self.kind == "&":
                self.i += 1
            elif self.kind == "row":
                self.i += 1
                if self.kind == "end":
                    break
                rows.append([])
            elif self.kind == "end":
                break
            else:
                raise _Decline(f"unexpected {self.kind} in a matrix")
        if self.take("end") != name:
            raise _Decline("mismatched matrix environment")
        if len({len(r) for r in rows}) != 1:
            raise _Decline("ragged matrix")
        return sympy.Matrix(rows)
