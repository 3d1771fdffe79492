"""A Countdown task: numbers, a target and the rules.

Example:
    >>> from certd.domains.countdown import CountdownTask
    >>> CountdownTask(numbers=(25, 5, 4, 3), target=83).numbers
    (25, 5, 4, 3)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from certd.errors import InvalidInputError

from .limits import DEFAULT_LIMITS, CountdownRules

__all__ = ["CountdownTask"]

MAX_NUMBER = 10**6
"""Largest number a task may give."""


@dataclass(frozen=True, slots=True)
class CountdownTask:
    """One Countdown question, validated on construction.

    Attributes:
        numbers: the given numbers, 1 to ``CountdownLimits().max_numbers`` of them, each in
            1..10**6; repeats allowed (each occurrence is its own number). A list is accepted
            and stored as a tuple.
        target: the value to reach, 0..``CountdownLimits().max_target``.
        rules: exactly-once (default) or at-most-once use of the numbers.

    Raises:
        InvalidInputError: with ``field`` ``countdown.numbers``, ``countdown.target`` or
            ``countdown.rules`` when a field is out of range or of the wrong type.
    """

    numbers: tuple[int, ...]
    target: int
    rules: CountdownRules = field(default_factory=CountdownRules)

    def __post_init__(self) -> None:
        numbers: object = self.numbers
        if isinstance(numbers, list):
            numbers = tuple(numbers)
            object.__setattr__(self, "numbers", numbers)
        if not isinstance(numbers, tuple):
            raise InvalidInputError(
                f"numbers must be a tuple of ints, got {type(numbers).__name__}",
                field="countdown.numbers",
            )
        max_numbers = DEFAULT_LIMITS.max_numbers
        if not 1 <= len(numbers) <= max_numbers:
            raise InvalidInputError(
                f"expected 1..{max_numbers} numbers, got {len(numbers)}",
                field="countdown.numbers",
            )
        for n in numbers:
            if type(n) is not int or not 1 <= n <= MAX_NUMBER:
                raise InvalidInputError(
                    f"each number must be an int in 1..{MAX_NUMBER}, got {n!r}",
                    field="countdown.numbers",
                )
        max_target = DEFAULT_LIMITS.max_target
        if type(self.target) is not int or not 0 <= self.target <= max_target:
            raise InvalidInputError(
                f"target must be an int in 0..{max_target}, got {self.target!r}",
                field="countdown.target",
            )
        if not isinstance(self.rules, CountdownRules):
            raise InvalidInputError(
                f"rules must be CountdownRules, got {type(self.rules).__name__}",
                field="countdown.rules",
            )
