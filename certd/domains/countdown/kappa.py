"""κ ``countdown.first-op.v1``: the first operand and the operator written after it.

Example:
    >>> from certd.domains.countdown import initiated_entry, kappa_first_op, parse_expression
    >>> kappa_first_op(parse_expression("(25-5)*4+3")).label
    '25,-'
    >>> initiated_entry("<think>4*20=80, 80+3=83</think><answer>(25-5)*4+3</answer>").label
    '4,*'

Two readings of the same κ:

* ``kappa_first_op`` (the answer's label): the leftmost literal of the parsed answer tree and
  the operator of its parent node. ``(25-5)*4+3`` → ``25,-``; ``4*(25-5)+3`` → ``4,*``; a bare
  literal ``83`` has the empty operator, label ``83,``.
* ``initiated_entry`` (what the reasoning started with): the first ``INT ws? OP ws? (INT|"(")``
  written in the text before the answer, with ``"source": "initiated"`` in its fields.

They differ when the reasoning opens with a different step than the final expression's
rendering, e.g. ``<think>4*20=80 ...</think><answer>(25-5)*4+3</answer>`` initiates ``4,*`` but
answers ``25,-``.
"""

from __future__ import annotations

import re

from certd.domains.verdict import Family

from .expr import Expr, first_op
from .extract import locate_answer
from .limits import DEFAULT_LIMITS, CountdownLimits
from .names import KAPPA
from .tokens import ALIASES

__all__ = ["family", "initiated_entry", "kappa_first_op", "scan_initiated"]

# Possessive quantifiers and a look-behind anchored at digit-run starts keep this linear.
_STEP = re.compile(r"(?<![0-9])([0-9]++)[ \t]*+([+\-*/×÷·∗∕−–])[ \t]*+[0-9(]")


def family(operand: int, operator: str, *, source: str = "") -> Family:
    """The κ ``countdown.first-op.v1`` family for one label.

    Args:
        operand: the first literal.
        operator: one of ``+ - * /``, or ``""`` for a bare literal.
        source: ``"initiated"`` for an initiated entry, else ``""`` (no field).

    Returns:
        ``Family(kappa=KAPPA, label="operand,operator", fields={...})``.
    """
    fields = {"operand": str(operand), "operator": operator}
    if source:
        fields["source"] = source
    return Family(kappa=KAPPA, label=f"{operand},{operator}", fields=fields)


def kappa_first_op(expr: Expr) -> Family:
    """The answer's entry family: its leftmost literal and that literal's parent operator.

    Args:
        expr: the parsed answer (aliases are already normalised, so ``×`` reads ``*``).

    Returns:
        The family; a bare literal gets the operator ``""`` (label ``"83,"``).
    """
    operand, operator = first_op(expr)
    return family(operand, operator)


def initiated_entry(response: str, limits: CountdownLimits = DEFAULT_LIMITS) -> Family | None:
    """The entry the reasoning initiated: the first ``number op operand`` written before the answer.

    The scanned text is everything before the answer's region (the last ``<answer>`` tag, or
    the answer line); with no answer at all, the whole response. The operand after the
    operator may be a number or ``(``. Numbers longer than ``max_literal_digits`` are skipped.

    Args:
        response: the model's full text.
        limits: limits used to locate the answer and to bound literals.

    Returns:
        The family with ``"source": "initiated"`` in its fields, or ``None`` when the text
        writes no such step.
    """
    located = locate_answer(response, limits)
    text = response if located is None else response[: located[1]]
    return scan_initiated(text, limits.max_literal_digits)


def scan_initiated(text: str, max_literal_digits: int) -> Family | None:
    """The first ``number op operand`` step written in ``text`` (internal)."""
    for m in _STEP.finditer(text):
        digits = m.group(1)
        if len(digits) <= max_literal_digits:
            return family(int(digits), ALIASES[m.group(2)], source="initiated")
    return None
