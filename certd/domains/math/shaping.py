"""Rewards per math verdict: plain data, so a server that never checks math loads no SymPy.

Example:
    >>> MathShaping(correct=1.0, wrong_answer=-0.5).wrong_answer
    -0.5
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MathShaping"]


@dataclass(frozen=True, slots=True)
class MathShaping:
    """Rewards per verdict."""

    correct: float = 1.0
    wrong_answer: float = 0.0
    unparsed: float = 0.0
