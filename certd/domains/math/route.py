"""κ ``math.route.v1``: the opening routes a response to step-by-step, direct or other.

Example:
    >>> route_of("Let's think step by step. First, ...")
    'step-by-step'
    >>> route_of(r"\\boxed{42}")
    'direct'
    >>> route_of("I cannot answer that.")
    'other'

The rules read only the **opening**: the first 24 whitespace-separated tokens, after
leading whitespace and a leading ``<think>`` tag. The first rule that holds decides:

1. nothing written → ``other``;
2. the opening *starts* with an answer (``\\boxed{``, "the answer is", "final answer:",
   "answer:", or a number; optionally after "so"/"thus"/"therefore"/"hence") → ``direct``;
3. one of the first 24 tokens (lower-cased, letters and ``'`` kept) is a reasoning cue
   (``CUES``: step, first, let, let's, we, since, because, given, consider, suppose, …)
   → ``step-by-step``;
4. the opening writes an equation (``=``) → ``step-by-step``;
5. the whole response is at most 24 tokens and writes a digit or ``\\boxed`` → ``direct``;
6. otherwise → ``other`` (refusals, restating the question, chatter).

The share of each route can be tracked per checkpoint with ``forkgate metrics`` over the
verdicts' labels.
"""

from __future__ import annotations

import re

from certd.domains.verdict import Family

from .names import KAPPA_ROUTE

__all__ = ["CUES", "OPENING_TOKENS", "ROUTES", "kappa_route", "route_of"]

OPENING_TOKENS = 24
ROUTES = ("direct", "other", "step-by-step")

CUES = frozenset(
    "step first firstly let let's lets we since because given consider suppose note using "
    "recall start begin compute calculate solve find simplify substitute set denote define "
    "observe assume think okay".split()
)
_DIRECT_START = re.compile(
    r"^(?:(?:so|thus|therefore|hence)\W*)?"
    r"(?:\$*\s*\\boxed\s*\{|\*{0,2}(?:the\s+)?(?:final\s+)?answer\s*(?:is|:)|\$*\s*[-+]?\d)",
    re.IGNORECASE,
)
_THINK = re.compile(r"^\s*<think>\s*", re.IGNORECASE)


def route_of(response: str) -> str:
    """The route label of a response's opening (see the module docstring for the rules).

    Args:
        response: the model text.

    Returns:
        ``direct``, ``step-by-step`` or ``other``.
    """
    head = _THINK.sub("", response[:4096]).lstrip()
    tokens = head.split(None, OPENING_TOKENS)
    opening = tokens[:OPENING_TOKENS]
    if not opening:
        return "other"
    if _DIRECT_START.match(head):
        return "direct"
    if any(re.sub(r"[^a-z']", "", t.lower()) in CUES for t in opening):
        return "step-by-step"
    if "=" in " ".join(opening):
        return "step-by-step"
    if len(tokens) <= OPENING_TOKENS and ("\\boxed" in head or re.search(r"\d", head)):
        return "direct"
    return "other"


def kappa_route(response: str) -> Family:
    """The ``math.route.v1`` family of a response.

    Args:
        response: the model text.

    Returns:
        The label, with field ``route``.
    """
    route = route_of(response)
    return Family(KAPPA_ROUTE, route, {"route": route})
