"""A fast reader for the common shapes of answer LaTeX that builds exactly what the grammar
builds, and declines everything else.

Example:
    >>> read_fast(r"y = -\\frac{1}{2}x + \\frac{3}{4}", is_real=True)  # unevaluated, as read
    Eq(y, -1*1/2*x + 3/4)
    >>> read_fast(r"(3, 1) \\cup [2, \\infty)", is_real=True)  # (3, 1) is a pair, not an interval
    Union({1, 3}, Interval(2, oo))
    >>> read_fast("n = 1, 2, 3", is_real=True)  # the grammar's reading: one relation, a set
    Eq(n, {1, 2, 3})
    >>> read_fast("f(2) < f(1)", is_real=True)  # a letter applied to an atom is a call
    f(2) < f(1)
    >>> read_fast(r"\\int_0^1 x\\,dx", is_real=True) is None   # not in the subset: declined
    True

Why: ``latex2sympy2_extended`` parses with an ANTLR grammar in pure Python; on a 2-core
machine its parse is most of the cost of checking an answer (10–300 ms for a matrix, an
equation or an interval union). Most answers use a small part of the grammar. This module
reads that part with a hand-written recursive-descent parser (microseconds) and builds the
SymPy object with the same constructors, in the same order, as the library's converter
(``_Latex2Sympy.convert_*``), so the object is *identical* (``==`` and ``srepr``), not merely
equivalent. ``tests/unit/math/test_fastlatex.py`` checks that on every answer of the warm-up
and priming corpora, the trap suite, a generated corpus and Math-Verify's public cases.

The subset (anything else returns ``None`` and the caller uses the grammar):

- numbers ``12``, ``3.25``, and with a base subscript the grammar drops (``204_5`` is 204);
  single letters except ``E i I j`` (the letter the grammar reads as a symbol ``e``, the
  imaginary unit), with ``d`` only where it is not a differential (``dx``), and no run of
  letters the grammar's lexer reads as one word (``tr``, ``eye``, ``svd``…); ``e`` and
  ``e^{…}`` (Euler's number, ``exp``); Greek letters; ``\\pi``; ``\\infty``; subscripts
  ``x_1``, ``a_{n}``, ``F_{n-k-1}``;
- ``+ -`` (binary and unary), ``* \\cdot \\times / \\div :``, implicit products (with the
  grammar's mixed-number reading: ``2\\frac{1}{2}`` is 5/2), ``^`` with a braced, digit or
  letter exponent (not the transpose ``^T``), ``!``, ``\\frac{}{}``, ``\\sqrt{}``,
  ``\\sqrt[n]{}``, parentheses, ``|…|`` (``Abs``) where no bar could be read otherwise;
- ``\\sin``-family functions, ``\\arcsin``-family, ``\\exp``, ``\\ln``, ``\\log``,
  ``\\log_b`` with a parenthesised argument or a lone atom (``\\sin x``, which ends at the next
  function: ``2\\sin b \\cos a``), ``\\sin^2(x)``, ``\\sin^{-1}(x)``; ``\\sum_{k=a}^{b}`` and
  ``\\prod`` over a product chain;
- a letter applied to one atom, which the grammar reads as a call: ``f(x)``, ``f(2)``,
  ``f^2(x)`` are ``Function('f')(…)``; before anything else in parentheses a letter is a
  factor (``x(x+1)``, ``f(-1)``);
- relations ``= < > \\le \\ge \\ne`` (chains become ``And``, as the grammar's) and
  ``\\approx``, which keeps the right side after names only (``x \\approx 3`` is 3,
  ``2x \\approx 3`` is 2x), as the converter does;
- at the top: lists separated by commas and semicolons (groups become tuples), ``a \\pm b``,
  intervals and tuples ``(a, b]``, ``(0; -2; 6)``, sets ``\\{…\\}``, unions with ``\\cup``;
  names, ``=``, then values (``n = 1, 2, 3`` is ``Eq(n, {1, 2, 3})``, ``(p, q) = (3, 2)``,
  ``D = (0, 1)``), the grammar's ``set_elements_relation``; a matrix (``pmatrix``,
  ``bmatrix``, ``matrix``) alone, or in sums and products (``MatAdd``, ``MatMul``).

Declined, among others: a subscripted or Greek name applied to an atom (its function name is
the grammar's raw text), several arguments ``f(x, y)`` (each is parsed again from its text),
nested bars, a matrix divided, powered or in a relation. The reader evaluates exactly where
the converter does (integer fractions become ``Rational``, ``e^{…}`` becomes ``exp(…)``,
intervals and sums are built by their constructors) and nowhere else; the caps
(``parse.check_tree_caps``) still run on its result before anything else evaluates it.
"""

from __future__ import annotations

import re
from typing import Any

import sympy
from latex2sympy2_extended.logic import And
from latex2sympy2_extended.sets import FiniteSet
from latex2sympy2_extended.symbols import get_symbol

__all__ = ["read_fast"]


class _Decline(Exception):
    """The text is outside the subset: the grammar must read it."""


_GREEK = frozenset(
    "alpha beta delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi "
    "rho sigma tau upsilon phi varphi chi psi omega Delta Theta Lambda Xi Sigma Phi Psi Omega "
    "Pi".split()
)
_RELATIONS = {
    "=": "=",
    "<": "<",
    ">": ">",
    "\\le": "<=",
    "\\leq": "<=",
    "\\ge": ">=",
    "\\geq": ">=",
    "\\ne": "!=",
    "\\neq": "!=",
    "\\lt": "<",
    "\\gt": ">",
    "<=": "<=",
    ">=": ">=",
    "!=": "!=",
    "\\approx": "approx",
}
_TRIG = frozenset("sin cos tan csc sec cot".split())
_FUNCTIONS = _TRIG | {"ln", "log", "exp", "arcsin", "arccos", "arctan"}
_MATRICES = frozenset({"pmatrix", "bmatrix", "matrix"})
_SIMPLE_COMMANDS = {
    "\\frac": "frac",
    "\\sqrt": "sqrt",
    "\\cdot": "*",
    "\\times": "*",
    "\\div": "/",
    "\\cup": "cup",
    "\\pi": "pi",
    "\\infty": "infty",
    "\\{": "{set",
    "\\}": "}set",
    "\\\\": "row",
    "\\(": "(v",
    "\\)": ")v",
    "\\pm": "pm",
    "\\mp": "pm",
}
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<letter>[A-Za-z])"
    r"|(?P<env>\\(?:begin|end)\{[a-z]+\})|(?P<cmd>\\[A-Za-z]+|\\[{}()]|\\\\)"
    r"|(?P<rel>[!<>]=)|(?P<op>[-+*/:^_!()\[\]{},;=<>&|]))"
)
_STARTS_FACTOR = frozenset(
    {"num", "letter", "greek", "pi", "infty", "(", "frac", "sqrt", "func", "sum", "begin"}
)
# What may follow a number's ignored subscript (``204_5``) without another reading.
_ENDS_TERM = frozenset(
    {"+", "-", "*", "/", ":", "rel", ",", "eof", ")", "]", "}", "}set", ")v", "pm", "cup"}
)
# What may follow a closing ``|`` when more bars come later (so it cannot be an opening one).
_AFTER_ABS = frozenset({"rel", ",", "eof", ")", "]", "}", "}set", ")v", "pm", "cup", "*", "/"})
_NO_LETTERS = frozenset("EiIj")
# Letter runs the grammar's lexer reads as one token (its bare-word function and matrix names;
# the longest match wins, so "tr" is never t·r), and what makes ``d`` a differential ``dx``.
_LEXER_WORDS = re.compile(
    r"tr|eig|svd|SVD|gcd|lcm|eye|floor|ceil|zeros|ones|cols|rows|diag|norm|rank|rref|hstack"
    r"|vstack|orth|nullspace|matrix|pmatrix|bmatrix|vmatrix|arsinh|arcsinh|arcosh|arccosh"
    r"|artanh|arctanh"
)
_DIFFERENTIAL = re.compile(r"\s*\\?[A-Za-z]")
_TRANSPOSE = re.compile(r"\^(?:T|\{T\})")  # the lexer's transpose tokens, not a power
_COMMA_NUMBER = re.compile(r"^\s*-?\d{1,3}(,\d{3})+(\.\d+)?\s*$")  # the grammar reads a number


_UNDECIDED = (TypeError, ValueError, AttributeError, ArithmeticError, NotImplementedError)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos, end = 0, len(text)
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip():
                raise _Decline(f"character {text[pos]!r}")
            break
        pos = m.end()
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind == "num":
            if pos < end and (text[pos] == "." or text[pos] in "eE"):
                raise _Decline("number followed by '.' or 'e'")
            out.append(("num", value))
        elif kind == "letter":
            if value in _NO_LETTERS or _LEXER_WORDS.match(text, pos - 1):
                raise _Decline(f"letter {value!r} (or a word the lexer reads whole)")
            if value == "d" and _DIFFERENTIAL.match(text, pos):
                raise _Decline("a differential d…")
            out.append(("letter", value))
        elif kind == "env":
            name = value[value.index("{") + 1 : -1]
            if name not in _MATRICES:
                raise _Decline(f"environment {name}")
            out.append(("begin" if value.startswith("\\begin") else "end", name))
        elif kind == "cmd":
            if value in _SIMPLE_COMMANDS:
                out.append((_SIMPLE_COMMANDS[value], value))
            elif value in _RELATIONS:
                out.append(("rel", _RELATIONS[value]))
            elif value[1:] in _GREEK:
                out.append(("greek", value))
            elif value[1:] in _FUNCTIONS:
                out.append(("func", value[1:]))
            elif value in ("\\sum", "\\prod"):
                out.append(("sum", value[1:]))
            else:
                raise _Decline(f"command {value}")
        elif kind == "rel" or value in "=<>":
            out.append(("rel", _RELATIONS[value]))
        else:
            if value == "^" and _TRANSPOSE.match(text, pos - 1):
                raise _Decline("a transpose ^T")
            out.append(("bar" if value == "|" else value, value))
    out.append(("eof", ""))
    return out


def _is_matrix(x: Any) -> bool:
    return bool(getattr(x, "is_Matrix", False))


def _no_matrix(*xs: Any) -> None:
    if any(_is_matrix(x) for x in xs):
        raise _Decline("a matrix in an operation")


def _add_flat(lh: Any, rh: Any) -> Any:
    if getattr(lh, "is_Add", False) or getattr(rh, "is_Add", False):
        args = list(lh.args) if getattr(lh, "is_Add", False) else [lh]
        args += list(rh.args) if getattr(rh, "is_Add", False) else [rh]
        return sympy.Add(*args, evaluate=False)
    return sympy.Add(lh, rh, evaluate=False)


def _mul_flat(lh: Any, rh: Any) -> Any:
    if getattr(lh, "is_Mul", False) or getattr(rh, "is_Mul", False):
        args = list(lh.args) if getattr(lh, "is_Mul", False) else [lh]
        args += list(rh.args) if getattr(rh, "is_Mul", False) else [rh]
        return sympy.Mul(*args, evaluate=False)
    return sympy.Mul(lh, rh, evaluate=False)


def _mat_add_flat(lh: Any, rh: Any) -> Any:
    """The converter's ``mat_add_flat``: a sum with a matrix in it, flattened, unevaluated."""
    if getattr(lh, "is_MatAdd", False) or getattr(rh, "is_MatAdd", False):
        args = list(lh.args) if getattr(lh, "is_MatAdd", False) else [lh]
        args += list(rh.args) if getattr(rh, "is_MatAdd", False) else [rh]
        return sympy.MatAdd(*args, evaluate=False)
    return sympy.MatAdd(lh, rh, evaluate=False)


def _mat_mul_flat(lh: Any, rh: Any) -> Any:
    """The converter's ``mat_mul_flat``: a product with a matrix in it, flattened."""
    if getattr(lh, "is_MatMul", False) or getattr(rh, "is_MatMul", False):
        args = list(lh.args) if getattr(lh, "is_MatMul", False) else [lh]
        args += list(rh.args) if getattr(rh, "is_MatMul", False) else [rh]
        return sympy.MatMul(*args, evaluate=False)
    return sympy.MatMul(lh, rh, evaluate=False)


def _divide(lh: Any, rh: Any) -> Any:
    _no_matrix(lh, rh)
    if getattr(lh, "is_Integer", False) and getattr(rh, "is_Integer", False):
        return sympy.Rational(lh, rh)
    return sympy.Mul(lh, sympy.Pow(rh, -1, evaluate=False), evaluate=False)


def _number(text: str) -> Any:
    if text.isdigit():
        text = text.lstrip("0") or "0"
    return sympy.Number(text)


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


class _Reader:
    def __init__(self, text: str, is_real: bool) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.is_real = is_real
        self.in_abs = False

    # -- token helpers ---------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return self.toks[self.i][0]

    def starts_factor(self) -> bool:
        """The next token starts another factor of an implicit product (``|`` opens one only
        outside ``|…|``, where it closes)."""
        return self.kind in _STARTS_FACTOR or (self.kind == "bar" and not self.in_abs)

    def take(self, kind: str) -> str:
        k, v = self.toks[self.i]
        if k != kind:
            raise _Decline(f"expected {kind}, found {k}")
        self.i += 1
        return v

    # -- top level: comma lists, sets, intervals, unions, relations ------------------------
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

    _OPEN = ("(", "[", "(v", "{", "{set")
    _CLOSE = (")", "]", ")v", "}", "}set")

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

    # -- expressions: additive > mp > unary > postfix list > exp > comp --------------------
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

    def _symbol(self, text: str, subscript: str) -> Any:
        return get_symbol(text + subscript, self.is_real, True)

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
            name = self.take("greek")
            if self.kind == "_":
                raise _Decline("a Greek letter with a subscript")
            if self._is_call():
                raise _Decline("a Greek letter applied to an atom")
            return self._symbol(name, "")
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
        if k == "frac":
            self.i += 1
            top = self._braced()
            bottom = self._braced()
            return _divide(top, bottom)
        if k == "sqrt":
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
        if k == "begin":
            return self.matrix()
        if k == "func":
            return self.function()
        if k == "sum":
            return self.sum()
        raise _Decline(f"unexpected {k}")

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
        if name in _TRIG:
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

    def _script_end(self, j: int) -> int:
        """Where a sub- or superscript's argument starting at ``j`` ends."""
        kind = self.toks[j][0]
        if kind == "{":
            return self._after_group(j)
        if kind in ("num", "letter", "greek", "pi", "infty"):
            return j + 1
        raise _Decline(f"a script argument {kind}")

    def _closer(self, j: int) -> int:
        """The index of the bracket that closes the one at ``j``."""
        depth = 0
        for k in range(j, len(self.toks)):
            kind = self.toks[k][0]
            depth += (kind in self._OPEN) - (kind in self._CLOSE)
            if depth == 0:
                return k
        raise _Decline("an unclosed bracket")

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

    def _after_group(self, j: int) -> int:
        depth = 0
        while self.toks[j][0] != "eof":
            depth += {"{": 1, "}": -1}.get(self.toks[j][0], 0)
            j += 1
            if depth == 0:
                break
        return j

    def _braced(self) -> Any:
        self.take("{")
        value = self.expr()
        self.take("}")
        return value

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


def read_fast(text: str, *, is_real: bool) -> Any | None:
    """Read normalised answer text in the common subset, or return None.

    Args:
        text: normalised answer text (``parse._normalize``'s output, as the grammar gets).
        is_real: the symbols' ``real`` assumption (as the grammar's converter is given).

    Returns:
        The SymPy object the grammar's converter would build, or None when the text is
        outside the subset (the caller then parses it with the grammar).
    """
    if _COMMA_NUMBER.match(text):
        return None
    try:
        return _Reader(text, is_real).top()
    except (_Decline, IndexError):
        return None
    except _UNDECIDED:
        return None  # a construction SymPy refuses: the grammar's converter decides
