"""Errors raised by the code domain.

Example:
    >>> from certd.domains.code import CodeTaskError, parse_compare
    >>> try:
    ...     parse_compare("fuzzy")
    ... except CodeTaskError as e:
    ...     print(e)
    compare: expected 'exact', 'whitespace' or 'float:TOL', got 'fuzzy'

The tree (under ``certd.errors.InvalidInputError``)::

    InvalidInputError
    ├── LimitExceededError   a task over a CodeLimits field (sizes, case counts)
    └── CodeTaskError        a malformed code task (unknown language, no tests, bad compare)
"""

from __future__ import annotations

from certd.errors import InvalidInputError

__all__ = ["CodeTaskError"]


class CodeTaskError(InvalidInputError):
    """The code task is malformed (expected X, got Y)."""
