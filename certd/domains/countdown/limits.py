"""Size limits for Countdown inputs, and the task's rules.

Example:
    >>> from certd.domains.countdown import CountdownLimits
    >>> CountdownLimits(max_depth=8).max_depth
    8
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from certd.errors import ConfigError

__all__ = ["CountdownLimits", "CountdownRules"]


MAX_LITERAL_DIGITS = 4_000
"""Ceiling for ``max_literal_digits``: CPython refuses to parse ints over 4,300 digits."""


@dataclass(frozen=True, slots=True)
class CountdownLimits:
    """Hard limits on what the parser and verifier accept.

    Every limit is checked before the work it bounds, so over-limit input costs at most one
    linear scan. An exceeded limit raises ``LimitExceededError`` naming the field and the value.

    Attributes:
        max_response_chars: longest response (characters) ``verify_countdown`` reads.
        max_expression_chars: longest answer expression (characters) the parser reads.
        max_depth: deepest parenthesis nesting (levels).
        max_literal_digits: most decimal digits in one integer literal (at most 4,000, below
            CPython's ``int`` parsing limit).
        max_numbers: most numbers in a task.
        max_tokens: most tokens (literals, operators, parentheses) in one expression.
        max_target: largest target.
    """

    max_response_chars: int = 65_536
    max_expression_chars: int = 1_024
    max_depth: int = 64
    max_literal_digits: int = 9
    max_numbers: int = 8
    max_tokens: int = 512
    max_target: int = 10**9

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not int or value < 1:
                raise ConfigError(f"CountdownLimits.{f.name} must be an int >= 1, got {value!r}")
        if self.max_literal_digits > MAX_LITERAL_DIGITS:
            raise ConfigError(
                f"CountdownLimits.max_literal_digits must be <= {MAX_LITERAL_DIGITS}, "
                f"got {self.max_literal_digits}"
            )


DEFAULT_LIMITS = CountdownLimits()


@dataclass(frozen=True, slots=True)
class CountdownRules:
    """The Countdown game's rules.

    Attributes:
        exactly_once: True (the TinyZero rule) when every given number must be used exactly
            once; False when each may be used at most once.
    """

    exactly_once: bool = True

    def __post_init__(self) -> None:
        if type(self.exactly_once) is not bool:
            raise ConfigError(
                f"CountdownRules.exactly_once must be a bool, got {self.exactly_once!r}"
            )
