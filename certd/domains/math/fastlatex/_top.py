"""The fast reader's top level: comma and semicolon lists, ``±``, sets, intervals, tuples,
unions, relation chains and the grammar's ``names = values`` reading.

Example:
    >>> _Reader(r"(3, 1) \\cup [2, \\infty)", is_real=True).top()  # (3, 1) is a pair
    Union({1, 3}, Interval(2, oo))
    >>> _Reader("(p, q) = (3, 2)", is_real=True).top()
    Eq((p, q), (3, 2))
"""

from __future__ import annotations

from typing import Any

import sympy
from latex2sympy2_extended.sets import FiniteSet

from ._atoms import _AtomReader
from ._build import _UNDECIDED, _is_matrix, _no_matrix, _relate, _set_or_tuple, _unary_minus
from ._lexer import _Decline

__all__ = ["_Reader"]


class _Reader(_AtomReader):
    """The whole text: ``top`` reads it and requires its end."""

    def top(self) -> Any:
        if self._names_then_list():
            return self.names_equal_list()
        groups = [self._comma_elements()]
        while self.kind == ";":
            self.i += 1
            groups.append(self._comma_elements())
        self.take("eof")
        if len(groups) > 1 or len(groups[0]) > 1:
            if any(isinstance(e, sympy.Union) for g in groups for e in g):
                raise _Decline("a union in a list: the grammar does not read it")
        return _set_or_tuple(groups)  # ``x = 1, 2`` was read by names_equal_list

    def _comma_elements(self) -> list[Any]:
        elements = self.element()
        while self.kind == ",":
            self.i += 1
            elements += self.element()
        return elements

    def _names_then_list(self) -> bool:
        """The text is the grammar's ``set_elements_relation``: a name or a parenthesised
        list of names, ``=``, then values with no relation among them (``n = 1, 2, 3``,
        ``(p, q) = (3, 2)``, ``D = (0, 1)``). The grammar prefers that reading to the others."""
        end = self._names_end(0)
        if end is None or self.toks[end] != ("rel", "="):
            return False
        depth = 0
        for kind, _ in self.toks[end + 1 :]:
            depth += (kind in self._OPEN) - (kind in self._CLOSE)
            if kind == "rel" and depth == 0:
                return False
        return True

    def _names_end(self, j: int) -> int | None:
        """Where the grammar's ``atom_expr_list`` starting at ``j`` ends, if one does."""
        if self.toks[j][0] != "(":
            return self._name_end(j)
        while True:
            end = self._name_end(j + 1)
            if end is None:
                return None
            if self.toks[end][0] == ")":
                return end + 1
            if self.toks[end][0] != ",":
                return None
            j = end

    def _name_end(self, j: int) -> int | None:
        """Where the grammar's ``atom_expr`` (a letter or Greek letter with at most one
        subscript and one superscript) starting at ``j`` ends, if one does."""
        kind, value = self.toks[j]
        if kind not in ("letter", "greek", "pi") or value == "e":
            return None
        end, seen = j + 1, set()
        while self.toks[end][0] in ("_", "^") and self.toks[end][0] not in seen:
            seen.add(self.toks[end][0])
            end = self._script_end(end + 1)
        return end

    def names_equal_list(self) -> Any:
        """``names = v1, v2, …`` as the converter's ``convert_set_elements_relation``: one
        value stands alone, several make a set (``±`` makes two)."""
        if self.kind == "(":
            self.i += 1
            names = [self._name()]
            while self.kind == ",":
                self.i += 1
                names.append(self._name())
            self.take(")")
            lhs = names[0] if len(names) == 1 else sympy.Tuple(*names)
        else:
            lhs = self._name()
        self.take("rel")
        groups: list[list[Any]] = [[]]
        while True:
            if self._set_ahead():
                groups[-1].append(self.set_atom())
                if self.kind == "cup":
                    raise _Decline("a union after 'x ='")
            else:
                groups[-1] += self._plus_minus()
            if self.kind == ";":
                groups.append([])
            elif self.kind != ",":
                break
            self.i += 1
        self.take("eof")
        _no_matrix(lhs, *(v for g in groups for v in g))
        return sympy.Eq(lhs, _set_or_tuple(groups), evaluate=False)

    def _name(self) -> Any:
        end = self._name_end(self.i)
        value = self.exp()
        if self.i != end:
            raise _Decline("a name the reader builds differently")
        return value

    def element(self) -> list[Any]:
        """One comma-separated element: a set, a relation chain, an expression, or ``a ± b``
        (two values, as the grammar's ``plus_minus_expr``)."""
        if self._set_ahead():
            value = self.set_atom()
            while self.kind == "cup":
                self.i += 1
                if not self._set_ahead():
                    raise _Decline("union with a non-set")
                right = self.set_atom()
                left = FiniteSet(*value) if isinstance(value, sympy.Tuple) else value
                right = FiniteSet(*right) if isinstance(right, sympy.Tuple) else right
                value = sympy.Union(left, right, evaluate=False)
            if self.kind not in (",", ";", "eof"):
                raise _Decline("a set followed by more")
            return [value]
        values = self._plus_minus()
        if len(values) == 2:
            return values
        value = values[0]
        if _is_matrix(value):
            if self.kind not in (",", ";", "eof"):
                raise _Decline("a matrix followed by more")
            return [value]
        while self.kind == "rel":
            op = self.take("rel")
            rh = self.expr()
            _no_matrix(value, rh)
            value = _relate(op, value, rh)
        if self.kind not in (",", ";", "eof"):
            raise _Decline(f"unexpected {self.kind}")
        return [value]

    def _plus_minus(self) -> list[Any]:
        """``expr``, ``a ± b`` → [a + b, a - b], or ``± b`` → [-b, b]."""
        left = None if self.kind == "pm" else self.expr()
        if self.kind != "pm":
            return [left]
        self.i += 1
        right = self.expr()
        _no_matrix(left, right)
        if self.kind not in (",", ";", "eof", ")", "]", ")v", "}set", "}"):
            raise _Decline("a ± followed by more")
        if left is None:
            return [_unary_minus(right), right]
        return [
            sympy.Add(left, right, evaluate=False),
            sympy.Add(left, _unary_minus(right), evaluate=False),
        ]

    def _set_ahead(self) -> bool:
        """A set atom starts here: ``\\{``, or a bracket or brace holding a top-level comma."""
        k = self.kind
        if k == "{set":
            return True
        if k not in ("(", "[", "(v", "{"):
            return False
        depth = 0
        for kind, _ in self.toks[self.i :]:
            if kind in self._OPEN:
                depth += 1
            elif kind in self._CLOSE:
                depth -= 1
                if depth == 0:
                    return False
            elif kind in (",", ";") and depth == 1:
                return True
            elif kind == "eof":
                return False
        return False

    def _items(self, close: tuple[str, ...]) -> tuple[list[Any], bool, bool]:
        """Expressions separated by commas or semicolons up to a closer, flattened; whether
        a ``±`` made two of one, and whether a semicolon separated any."""
        items = self._plus_minus()
        pm, semicolon = len(items) == 2, False
        while self.kind in (",", ";"):
            semicolon = semicolon or self.kind == ";"
            self.i += 1
            more = self._plus_minus()
            pm = pm or len(more) == 2
            items += more
        if self.kind not in close:
            raise _Decline(f"unexpected {self.kind} in a set")
        _no_matrix(*items)
        return items, pm, semicolon

    def set_atom(self) -> Any:
        opener = self.kind
        self.i += 1
        if opener in ("{set", "{"):
            items, _, _ = self._items(("}set",) if opener == "{set" else ("}",))
            self.i += 1
            return FiniteSet(*items)
        items, pm, semicolon = self._items((")", "]", ")v"))
        closer = self.kind
        self.i += 1
        parens = opener in ("(", "(v") and closer in (")", ")v")
        if semicolon:  # an ordered tuple ``(0; -2; 6)``, never an interval
            if (opener, closer) not in (("(", ")"), ("(v", ")v"), ("[", "]")):
                raise _Decline("mismatched brackets around a semicolon list")
            return sympy.Tuple(*items)
        if pm or len(items) != 2:
            if parens:
                return sympy.Tuple(*items)
            raise _Decline("a bracketed list that is not an interval")
        left, right = items
        left_open, right_open = opener in ("(", "(v"), closer in (")", ")v")
        try:
            if (left_open and right_open and right <= left) or (
                not left_open and not right_open and right < left
            ):
                return sympy.Tuple(left, right)
        except _UNDECIDED:  # as the grammar's converter: an order SymPy cannot decide
            pass
        return sympy.Interval(left, right, left_open=left_open, right_open=right_open)
