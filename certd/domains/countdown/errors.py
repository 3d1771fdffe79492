"""Errors raised by the Countdown domain.

Example:
    >>> from certd.domains.countdown import CountdownRuleError, parse_expression
    >>> try:
    ...     parse_expression("2**10")
    ... except CountdownRuleError as e:
    ...     print(e)
    power operator '**' is not allowed at offset 1

The tree (all under ``certd.errors.InvalidInputError``)::

    InvalidInputError
    ├── LimitExceededError             an input over a CountdownLimits field
    ├── CountdownSyntaxError           nothing parseable: unbalanced parentheses, stray characters
    └── CountdownRuleError             a forbidden construct: '**', '//', '%', identifiers,
        │                              function calls, unary minus, implicit multiplication
        └── CountdownZeroDivisionError division by zero while evaluating an answer
"""

from __future__ import annotations

from certd.errors import InvalidInputError

__all__ = ["CountdownRuleError", "CountdownSyntaxError", "CountdownZeroDivisionError"]


class CountdownSyntaxError(InvalidInputError):
    """The text is not an arithmetic expression (verdict INVALID_FORMAT)."""


class CountdownRuleError(InvalidInputError):
    """The expression uses a construct the Countdown rules forbid (verdict RULE_VIOLATION)."""


class CountdownZeroDivisionError(CountdownRuleError):
    """The expression divides by zero (verdict RULE_VIOLATION)."""
