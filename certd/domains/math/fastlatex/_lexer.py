"""The fast reader's tokens: the lexer, the token kinds it sorts commands into, and the
cursor the readers move over the token list.

Example:
    >>> _tokens(r"2x \\le y")
    [('num', '2'), ('letter', 'x'), ('rel', '<='), ('letter', 'y'), ('eof', '')]
    >>> _tokens("tr")  # a word the grammar's lexer reads whole
    Traceback (most recent call last):
    ...
    certd.domains.math.fastlatex._lexer._Decline: letter 't' (or a word the lexer reads whole)

A token is ``(kind, value)``. The lexer declines (raises ``_Decline``) as soon as the text
leaves the subset: an unknown command or environment, a letter or letter run the grammar's
lexer reads otherwise (``i``, ``dx``, ``tr``), a transpose ``^T``.
"""

from __future__ import annotations

import re

__all__ = [
    "_AFTER_ABS",
    "_Cursor",
    "_Decline",
    "_ENDS_TERM",
    "_HYPERBOLIC",
    "_TRIG",
    "_tokens",
]


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
# The grammar's hyperbolic functions: built as the trigonometric ones (a power -1 is the inverse).
_HYPERBOLIC = frozenset("sinh cosh tanh".split())
_FUNCTIONS = _TRIG | _HYPERBOLIC | {"ln", "log", "exp", "arcsin", "arccos", "arctan"}
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
    "\\lfloor": "lfloor",
    "\\rfloor": "rfloor",
    "\\lceil": "lceil",
    "\\rceil": "rceil",
}
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<letter>[A-Za-z])"
    r"|(?P<env>\\(?:begin|end)\{[a-z]+\})|(?P<cmd>\\[A-Za-z]+|\\[{}()]|\\\\)"
    r"|(?P<rel>[!<>]=)|(?P<op>[-+*/:^_!()\[\]{},;=<>&|]))"
)
_STARTS_FACTOR = frozenset(
    {"num", "letter", "greek", "pi", "infty", "(", "frac", "sqrt", "func", "sum", "begin"}
    | {"lfloor", "lceil"}
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


class _Cursor:
    """The token list of one text and the reader's place in it, with the lookahead scans
    (bracket and script ends) that read nothing."""

    def __init__(self, text: str, is_real: bool) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.is_real = is_real
        self.in_abs = False

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

    _OPEN = ("(", "[", "(v", "{", "{set", "lfloor", "lceil")
    _CLOSE = (")", "]", ")v", "}", "}set", "rfloor", "rceil")

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

    def _after_group(self, j: int) -> int:
        depth = 0
        while self.toks[j][0] != "eof":
            depth += {"{": 1, "}": -1}.get(self.toks[j][0], 0)
            j += 1
            if depth == 0:
                break
        return j
