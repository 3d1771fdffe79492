"""The Countdown expression parser: iterative precedence climbing, no recursion, no eval.

Example:
    >>> from certd.domains.countdown import parse_expression, render
    >>> render(parse_expression("3 + 4 × (25 − 5)"))
    '3+4*(25-5)'

Grammar (standard precedence, left-associative)::

    expr    := term (("+" | "-") term)*
    term    := factor (("*" | "/") factor)*
    factor  := INT | "(" expr ")"

The parser is a shunting-yard loop over the token list: parenthesis depth is checked against
``max_depth`` before a level is opened, so 10,000 nested parentheses fail at level 65 in
microseconds and no input can exhaust the Python stack.
"""

from __future__ import annotations

from typing import NoReturn

from certd.errors import LimitExceededError

from .errors import CountdownRuleError, CountdownSyntaxError
from .expr import BinOp, Expr, Num
from .limits import DEFAULT_LIMITS, CountdownLimits
from .tokens import tokenize

__all__ = ["parse_expression"]

_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "(": 0}
_FIELD = "countdown.expression"


def parse_expression(text: str, limits: CountdownLimits = DEFAULT_LIMITS) -> Expr:
    """Parse a Countdown answer into an expression tree.

    Args:
        text: the expression, e.g. ``(25-5)*4+3``; ``×`` ``÷`` and other aliases allowed.
        limits: size limits (characters, tokens, literal digits, parenthesis depth).

    Raises:
        LimitExceededError: when the text is over a limit (the message names it).
        CountdownRuleError: for a forbidden construct: ``**``, ``//``, ``%``, identifiers,
            function calls, unary minus or plus, implicit multiplication such as ``4(5)``.
        CountdownSyntaxError: when the text is not an expression (empty, unbalanced
            parentheses, a missing operand or operator, a stray character).

    Returns:
        The expression tree.
    """
    tokens = tokenize(text, limits)
    max_depth = limits.max_depth
    operands: list[Expr] = []
    ops: list[str] = []
    depth = 0
    expect_operand = True
    prev: int | str = ""
    for tok in tokens:
        if type(tok) is int:
            if not expect_operand:
                _raise_missing_operator(tok, prev)
            operands.append(Num(tok))
            expect_operand = False
        elif tok == "(":
            if not expect_operand:
                _raise_missing_operator(tok, prev)
            depth += 1
            if depth > max_depth:
                raise _too_deep(max_depth)
            ops.append("(")
        elif tok == ")":
            if expect_operand:
                raise CountdownSyntaxError("missing operand before ')'", field=_FIELD)
            while ops and ops[-1] != "(":
                _reduce(operands, ops.pop())
            if not ops:
                raise CountdownSyntaxError("unbalanced ')'", field=_FIELD)
            ops.pop()
            depth -= 1
        else:
            assert type(tok) is str
            if expect_operand:
                _raise_missing_operand(tok)
            p = _PREC[tok]
            while ops and _PREC[ops[-1]] >= p:
                _reduce(operands, ops.pop())
            ops.append(tok)
            expect_operand = True
        prev = tok
    if expect_operand:  # no tokens at all, or an operator last
        message = "expression ends with an operator" if tokens else "empty expression"
        raise CountdownSyntaxError(message, field=_FIELD)
    return _drain(operands, ops)


def _raise_missing_operator(tok: int | str, prev: int | str) -> NoReturn:
    """Raise the error for an operand (a literal or ``(``) where an operator was due."""
    if tok == "(":
        raise CountdownRuleError("implicit multiplication before '(' is not allowed", field=_FIELD)
    if prev == ")":
        raise CountdownRuleError(
            f"implicit multiplication before {tok} is not allowed", field=_FIELD
        )
    raise CountdownSyntaxError(
        f"missing operator before {tok} (two numbers in a row)", field=_FIELD
    )


def _too_deep(max_depth: int) -> LimitExceededError:
    """The error for a parenthesis opened past ``max_depth`` (raised by the caller)."""
    return LimitExceededError(f"parentheses nest deeper than max_depth={max_depth}", field=_FIELD)


def _raise_missing_operand(op: str) -> NoReturn:
    """Raise the error for the operator ``op`` where an operand was due."""
    if op in ("-", "+"):
        raise CountdownRuleError(f"unary '{op}' is not allowed", field=_FIELD)
    raise CountdownSyntaxError(f"missing operand before '{op}'", field=_FIELD)


def _drain(operands: list[Expr], ops: list[str]) -> Expr:
    """Reduce the operators left at the end of the tokens; return the one expression."""
    while ops:
        op = ops.pop()
        if op == "(":
            raise CountdownSyntaxError("unbalanced '('", field=_FIELD)
        _reduce(operands, op)
    assert len(operands) == 1
    return operands[0]


def _reduce(operands: list[Expr], op: str) -> None:
    right = operands.pop()
    operands[-1] = BinOp(op, operands[-1], right)
