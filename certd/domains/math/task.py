"""A math task: the gold answer and how to compare against it.

Example:
    >>> MathTask(gold=r"\\frac{1}{2}").precision_digits is None   # exact comparison
    True
    >>> MathTask(gold="3.14159", precision_digits=6).precision_digits
    6
"""

from __future__ import annotations

from dataclasses import dataclass

from certd.errors import InvalidInputError, LimitExceededError

__all__ = ["MathTask"]

MAX_GOLD_CHARS = 4_096


@dataclass(frozen=True, slots=True)
class MathTask:
    """One math question's checking data.

    Attributes:
        gold: the gold answer (LaTeX, a plain expression, ``\\boxed{…}`` text or a choice
            letter A–J).
        precision_digits: the declared precision, in significant digits, or None (the
            default): numbers compare exactly. When declared, and a side writes a decimal
            number, an answer within half a unit of the gold's last declared digit is equal
            (exact comparison always comes first; docs/math-domain.md).
        question: the question text (optional; not used for checking).

    Raises:
        InvalidInputError: an empty gold answer or a precision outside 1..30.
        LimitExceededError: a gold answer over 4,096 characters.
    """

    gold: str
    precision_digits: int | None = None
    question: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.gold, str) or not self.gold.strip():
            raise InvalidInputError("the gold answer is empty", field="math.gold")
        if len(self.gold) > MAX_GOLD_CHARS:
            raise LimitExceededError(
                f"gold answer is {len(self.gold)} chars, over {MAX_GOLD_CHARS}",
                field="math.gold",
            )
        digits = self.precision_digits
        if digits is not None and (not isinstance(digits, int) or not 1 <= digits <= 30):
            raise InvalidInputError(
                f"precision_digits must be in 1..30, got {self.precision_digits!r}",
                field="math.precision_digits",
            )
