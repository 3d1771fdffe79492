"""The first step written in a Countdown response's ``<think>`` (the learned κ reads it).

Example:
    >>> countdown_first_step("<think>25-5=20, then 20*4=80</think> (25-5)*4")
    '25-5=20'
    >>> countdown_first_step("<think>hmm</think> 3") is None
    True
"""

from __future__ import annotations

import re

__all__ = ["MAX_STEP_CHARS", "countdown_first_step"]

MAX_STEP_CHARS = 300
_THINK = re.compile(r"^\s*<think>(.*?)(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_OP = re.compile(r"\d\s*[-+*/×÷−]\s*[\d(]")


def countdown_first_step(response: str) -> str | None:
    """The first step written in a Countdown response's ``<think>``, or None."""
    m = _THINK.match(response[:20_000])
    if m is None:
        return None
    head = re.split(r",|\n", m.group(1), maxsplit=1)[0].strip()
    return head[:MAX_STEP_CHARS] if _OP.search(head) else None
