"""Errors of the math domain (all are ``CertdError``s).

The tree::

    MathError
    ├── MathUnparsedError      no answer, or text that does not parse (verdict UNPARSED)
    └── MathLimitError         over a size, depth or exponent cap (verdict UNPARSED)

Example:
    >>> str(MathUnparsedError("unbalanced braces"))
    'unbalanced braces'
"""

from __future__ import annotations

from certd.errors import CertdError

__all__ = ["MathError", "MathLimitError", "MathUnparsedError"]


class MathError(CertdError):
    """Root of the math domain's errors."""


class MathUnparsedError(MathError):
    """The response has no answer, or its answer does not parse."""


class MathLimitError(MathUnparsedError):
    """An answer over a cap (characters, brace depth, ``\\frac`` count, exponent size)."""
