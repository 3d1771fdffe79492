"""The canonical solution of a correct Countdown answer, for solution coverage (#33).

Example:
    >>> canonical_solution("(25-5)*4+3"), canonical_solution("3+4*(25-5)")
    ('3+4*(25-5)', '3+4*(25-5)')

Two answers are one solution when certd's pseudo-fork normal form
(``certd.domains.countdown.canonical_form``: commuted or re-associated renderings, identity
operations removed) makes them equal. An analysis job, like ``kappa_calibrate``, runs that
pure code in-process; the library never imports a domain. The figure itself is computed in
``forkgate.coverage_metrics`` (the one place).
"""

from __future__ import annotations

from certd.domains.countdown import (
    CountdownRuleError,
    CountdownSyntaxError,
    canonical_form,
    parse_expression,
)

__all__ = ["canonical_solution"]


def canonical_solution(answer: str) -> str:
    """The normal form of a verdict's answer expression (the answer, stripped, when it does
    not parse: a correct verdict's answer always parses)."""
    try:
        return canonical_form(parse_expression(answer))
    except (CountdownSyntaxError, CountdownRuleError, ValueError):
        return answer.strip()
