"""The Countdown tokenizer: one linear pass, every limit checked as it goes.

Example:
    >>> from certd.domains.countdown.tokens import tokenize
    >>> tokenize("(25 − 5) × 4 + 3")
    ['(', 25, '-', 5, ')', '*', 4, '+', 3]

Tokens are ``int`` (a literal) or a one-character ``str``: ``+ - * / ( )``. Aliases are
normalised: ``×`` ``·`` ``∗`` → ``*``, ``÷`` ``∕`` → ``/``, ``−`` (U+2212) ``–`` (U+2013) → ``-``.
"""

from __future__ import annotations

from typing import NoReturn

from certd.errors import LimitExceededError

from .errors import CountdownRuleError, CountdownSyntaxError
from .limits import DEFAULT_LIMITS, CountdownLimits

__all__ = ["ALIASES", "Token", "tokenize"]

Token = int | str

ALIASES = {
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "×": "*",
    "·": "*",
    "∗": "*",
    "÷": "/",
    "∕": "/",
    "−": "-",
    "–": "-",
}
"""Operator characters and the operator each stands for."""

_FORBIDDEN = {
    "%": "modulo operator '%'",
    "^": "operator '^'",
    ".": "decimal point '.'",
    "!": "factorial or negation '!'",
    "&": "operator '&'",
    "|": "operator '|'",
    "<": "comparison '<'",
    ">": "comparison '>'",
    "~": "operator '~'",
    "@": "operator '@'",
    "[": "bracket '['",
    "]": "bracket ']'",
    "{": "brace '{'",
    "}": "brace '}'",
    "√": "square root '√'",
}
_DIGITS = frozenset("0123456789")
_SPACE = frozenset(" \t\r\n\f\v")


def tokenize(text: str, limits: CountdownLimits = DEFAULT_LIMITS) -> list[Token]:
    """Split an expression into tokens.

    Args:
        text: the expression text.
        limits: size limits; ``max_expression_chars`` is checked before anything else.

    Raises:
        LimitExceededError: when the text, a literal or the token count is over its limit.
        CountdownRuleError: for a forbidden construct (``**``, ``//``, ``%``, an identifier or
            function call, a decimal point, ...).
        CountdownSyntaxError: for any other character outside the grammar.

    Returns:
        The tokens, aliases normalised.
    """
    n = len(text)
    if n > limits.max_expression_chars:
        raise _over_limit(
            f"expression is {n} chars, over max_expression_chars={limits.max_expression_chars}"
        )
    max_digits = limits.max_literal_digits
    max_tokens = limits.max_tokens
    out: list[Token] = []
    i = 0
    while i < n:
        ch = text[i]
        if ch in _SPACE:
            i += 1
            continue
        if ch in _DIGITS:
            j = i + 1
            while j < n and text[j] in _DIGITS:
                j += 1
            if j - i > max_digits:
                raise _over_limit(
                    f"literal at offset {i} has {j - i} digits, "
                    f"over max_literal_digits={max_digits}"
                )
            out.append(int(text[i:j]))
            i = j
        elif ch in ALIASES:
            op = ALIASES[ch]
            nxt = text[i + 1] if i + 1 < n else ""
            if (op == "*" and nxt in ("*", "×")) or (op == "/" and nxt in ("/", "÷")):
                _raise_doubled(op, i)
            out.append(op)
            i += 1
        elif ch == "(" or ch == ")":
            out.append(ch)
            i += 1
        else:
            _raise_outside(text, i)
        if len(out) > max_tokens:
            raise _over_limit(
                f"expression has more than {max_tokens} tokens, over max_tokens={max_tokens}"
            )
    return out


def _over_limit(message: str) -> LimitExceededError:
    """The limit error for the expression field (raised by the caller)."""
    return LimitExceededError(message, field="countdown.expression")


def _raise_doubled(op: str, i: int) -> NoReturn:
    """Raise the rule error for ``**`` (``op`` is ``*``) or ``//`` (``op`` is ``/``) at ``i``."""
    if op == "*":
        raise CountdownRuleError(
            f"power operator '**' is not allowed at offset {i}", field="countdown.expression"
        )
    raise CountdownRuleError(
        f"floor division '//' is not allowed at offset {i}", field="countdown.expression"
    )


def _raise_outside(text: str, i: int) -> NoReturn:
    """Raise the error for the character at ``i``, which starts no token of the grammar."""
    ch = text[i]
    if ch.isalpha() or ch == "_":
        _raise_identifier(text, i)
    if ch in _FORBIDDEN:
        raise CountdownRuleError(
            f"{_FORBIDDEN[ch]} is not allowed at offset {i}", field="countdown.expression"
        )
    raise CountdownSyntaxError(
        f"unexpected character {ch!r} at offset {i}", field="countdown.expression"
    )


def _raise_identifier(text: str, i: int) -> NoReturn:
    """Raise the rule error for the identifier starting at ``i`` (a call when ``(`` follows)."""
    n = len(text)
    j = i + 1
    while j < n and j - i < 32 and (text[j].isalnum() or text[j] == "_"):
        j += 1
    name = text[i:j]
    k = j
    while k < n and text[k] in _SPACE:
        k += 1
    if k < n and text[k] == "(":
        raise CountdownRuleError(
            f"function call {name}(...) is not allowed at offset {i}",
            field="countdown.expression",
        )
    raise CountdownRuleError(
        f"identifier {name!r} is not allowed at offset {i}", field="countdown.expression"
    )
