"""Output comparison, done by the trusted verifier outside the sandbox.

Example:
    >>> from certd.domains.code import compare_output, parse_compare
    >>> compare_output("1 2\\n", "1  2", parse_compare("whitespace"))
    True
    >>> compare_output("0.3333333\\n", "0.33333331", parse_compare("float:1e-6"))
    True
    >>> compare_output("3\\n", "3", parse_compare("exact"))
    False
"""

from __future__ import annotations

import math

from .task import Comparison

__all__ = ["compare_output"]


def _as_float(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def compare_output(expected: str, actual: str, comparison: Comparison) -> bool:
    """Whether ``actual`` matches ``expected`` under ``comparison``.

    ``exact`` compares the strings as they are; ``whitespace`` compares the sequences of
    whitespace-separated tokens (so trailing newlines, runs of spaces and line breaks do not
    matter, but missing or extra tokens do); ``float:TOL`` compares tokens like ``whitespace``,
    except that two numeric tokens match when they differ by at most TOL absolutely or
    relatively. NaN and infinities never match by tolerance.

    Args:
        expected: The expected stdout.
        actual: What the program printed (decoded UTF-8, invalid bytes replaced).
        comparison: The declared comparison.

    Returns:
        True when they match.
    """
    if comparison.mode == "exact":
        return expected == actual
    want, got = expected.split(), actual.split()
    if len(want) != len(got):
        return False
    if comparison.mode == "whitespace":
        return want == got
    tol = comparison.tolerance
    for w, g in zip(want, got, strict=True):
        if w == g:
            continue
        fw, fg = _as_float(w), _as_float(g)
        if fw is None or fg is None:
            return False
        if abs(fw - fg) > tol and abs(fw - fg) > tol * abs(fw):
            return False
    return True
