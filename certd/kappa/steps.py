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

from certd.domains import registry
from certd.domains.countdown.first_step import MAX_STEP_CHARS, countdown_first_step
from certd.errors import UnsupportedError

__all__ = ["MAX_STEP_CHARS", "countdown_first_step", "domains", "first_step"]


def domains() -> tuple[str, ...]:
    """The domains whose spec reads first steps (the learned κ serves these)."""
    return tuple(s.name for s in registry.specs() if s.first_step is not None)


def first_step(domain: str, response: str) -> str | None:
    """The first substantive step of a response of ``domain``, or None.

    Raises:
        UnsupportedError: the learned κ has no step extractor for the domain.
    """
    spec = registry.get(domain)
    if spec is None or spec.first_step is None:
        raise UnsupportedError(
            f"the learned κ reads first steps of {', '.join(domains())}, not {domain!r}"
        )
    return spec.first_step(response)
