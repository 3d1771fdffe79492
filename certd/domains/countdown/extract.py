"""Find the answer expression in a model response.

Example:
    >>> from certd.domains.countdown import extract_answer
    >>> extract_answer("<think>25-5=20</think><answer>(25-5)*4+3 = 83</answer>")
    '(25-5)*4+3'
    >>> extract_answer("I tried 25+5.\\n(25-5)*4+3\\nDone.")
    '(25-5)*4+3'

Rules, in order:

1. If the response contains ``<answer>``, the answer is the content of the last complete
   ``<answer>…</answer>`` pair (stripped); with no complete pair there is no answer. Lines are
   not consulted, so reasoning text is never mistaken for the answer.
2. Otherwise the answer is the last line that parses as an expression.
3. Either way, a trailing ``= N`` (N a plain non-negative integer) is stripped. The claimed N is
   ignored: only the expression's own value is compared with the target, so ``= 84`` after an
   expression worth 83 changes nothing.

Every step is a linear scan (``str.rfind`` and one pass over the lines); no regular expression
here can backtrack.
"""

from __future__ import annotations

import re

from certd.errors import InvalidInputError

from .expr import Expr
from .limits import DEFAULT_LIMITS, CountdownLimits
from .parser import parse_expression

__all__ = ["extract_answer", "locate_answer", "strip_suffix"]

_OPEN = "<answer>"
_CLOSE = "</answer>"
# Characters a candidate answer line may contain: one character class, so matching is linear.
_LINE_ALPHABET = re.compile(r"[0-9 \t\f\v+\-*/()×÷·∗∕−–=]+")
_FIRST = frozenset("0123456789(")
_LAST = frozenset("0123456789)")


def strip_suffix(text: str) -> str:
    """``text`` without a trailing ``= N`` (N a plain non-negative integer) (internal)."""
    idx = text.rfind("=")
    if idx < 0:
        return text
    tail = text[idx + 1 :].strip()
    if tail and tail.isascii() and tail.isdigit():
        return text[:idx].rstrip()
    return text


def locate_answer(
    response: str, limits: CountdownLimits = DEFAULT_LIMITS
) -> tuple[str, int, Expr | None] | None:
    """The answer text, the offset where its region starts, and its tree if parsed (internal).

    Text before the offset is the reasoning that ``initiated_entry`` scans. Tag content is not
    parsed here (the tree is ``None``); an answer line is, so its tree comes back.
    """
    if _OPEN in response:
        close = response.rfind(_CLOSE)
        if close < 0:
            return None
        start = response.rfind(_OPEN, 0, close)
        if start < 0:
            return None
        return strip_suffix(response[start + len(_OPEN) : close].strip()), start, None
    end = len(response)
    while end > 0:
        start = response.rfind("\n", 0, end) + 1
        line = response[start:end].strip()
        end = start - 1
        if not line or _LINE_ALPHABET.fullmatch(line) is None:
            continue
        candidate = strip_suffix(line)
        if not candidate or candidate[0] not in _FIRST or candidate[-1] not in _LAST:
            continue  # cannot parse: skip the exception path
        try:
            expr = parse_expression(candidate, limits)
        except InvalidInputError:
            continue
        return candidate, start, expr
    return None


def extract_answer(response: str, limits: CountdownLimits = DEFAULT_LIMITS) -> str | None:
    """The answer expression of a response.

    Args:
        response: the model's full text.
        limits: limits used to decide whether a line parses (tag mode does not parse).

    Returns:
        The last ``<answer>`` content, or else the last line that parses, with any trailing
        ``= N`` stripped; ``None`` when there is none. Tag content is returned even when it
        does not parse (the verifier then reports why).
    """
    located = locate_answer(response, limits)
    return None if located is None else located[0]
