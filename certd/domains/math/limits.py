"""Caps on math inputs, checked before SymPy sees anything.

Example:
    >>> MathLimits().max_answer_chars
    1024
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MathLimits"]


@dataclass(frozen=True, slots=True)
class MathLimits:
    """Size caps of the math verifier (all checked on text or on the unevaluated tree).

    Attributes:
        max_response_chars: a longer response is UNPARSED without being read.
        max_gold_chars: a longer gold answer is refused when the task is built.
        max_answer_chars: a longer extracted answer is UNPARSED.
        max_brace_depth: deeper ``{}``/``()``/``[]`` nesting is UNPARSED.
        max_fracs: more ``\\frac`` commands in one answer is UNPARSED.
        max_tree_nodes: more nodes in the parsed (unevaluated) tree is UNPARSED.
        max_integer_digits: a longer integer literal is UNPARSED.
        max_power_digits: a power whose value would have more digits is UNPARSED.
    """

    max_response_chars: int = 1_048_576
    max_gold_chars: int = 4_096
    max_answer_chars: int = 1_024
    max_brace_depth: int = 32
    max_fracs: int = 32
    max_tree_nodes: int = 2_000
    max_integer_digits: int = 2_000
    max_power_digits: int = 10_000
