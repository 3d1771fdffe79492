"""First-step extraction per domain for the learned κ (pure).

Example:
    >>> countdown_first_step("<think>25-5=20, 20*4=80</think><answer>(25-5)*4</answer>")
    '25-5=20'
    >>> first_step("math", "Okay, so I need to find x.\\nFirst, factor: (x-2)(x-3) = 0.")
    'First, factor: (x-2)(x-3) = 0.'
    >>> first_step("countdown", "<answer>3+4</answer>") is None
    True

Math uses ``math.first-step.v1``'s extraction (``first_step_text``: the first sentence after
the preamble that writes math or names a move). Countdown's ``<think>`` is a list of steps
separated by commas: the first step is the text before the first comma, ``</think>`` or line
break, when it writes an operation (a digit, an operator, another digit). Steps are cut to
``MAX_STEP_CHARS``.
"""

from __future__ import annotations

import re

from certd.errors import UnsupportedError

__all__ = ["DOMAINS", "MAX_STEP_CHARS", "countdown_first_step", "first_step"]

MAX_STEP_CHARS = 300
DOMAINS = ("countdown", "math")
_THINK = re.compile(r"^\s*<think>(.*?)(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_OP = re.compile(r"\d\s*[-+*/×÷−]\s*[\d(]")


def countdown_first_step(response: str) -> str | None:
    """The first step written in a Countdown response's ``<think>``, or None."""
    m = _THINK.match(response[:20_000])
    if m is None:
        return None
    head = re.split(r",|\n", m.group(1), maxsplit=1)[0].strip()
    return head[:MAX_STEP_CHARS] if _OP.search(head) else None


def first_step(domain: str, response: str) -> str | None:
    """The first substantive step of a response of ``domain``, or None.

    Raises:
        UnsupportedError: the learned κ has no step extractor for the domain.
    """
    if domain == "math":
        # math.first-step.v1's extraction; imported here: the math package loads sympy.
        from certd.domains.math.first_step import first_step_text

        return first_step_text(response)
    if domain == "countdown":
        return countdown_first_step(response)
    raise UnsupportedError(
        f"the learned κ reads first steps of {', '.join(DOMAINS)}, not {domain!r}"
    )
