"""The Countdown domain: parse, verify, label (κ ``countdown.first-op.v1``) and enumerate.

Example:
    >>> from certd.domains.countdown import CountdownTask, verify_countdown
    >>> task = CountdownTask(numbers=(25, 5, 4, 3), target=83)
    >>> v = verify_countdown(task, "<answer>(25-5)*4+3</answer>")
    >>> v.status.name, v.family.label, v.canonical
    ('CORRECT', '25,-', '3+4*(25-5)')

Pure code: no I/O, no logging, no ``eval``. Every input is bounded by ``CountdownLimits``.
"""

from __future__ import annotations

from .canonical import canonical_form, labels_of
from .enumeration import (
    Enumeration,
    FamilyCount,
    LabelWitness,
    count_families,
    enumerate_families,
)
from .errors import CountdownRuleError, CountdownSyntaxError, CountdownZeroDivisionError
from .expr import BinOp, Expr, Num, evaluate, leaves, render
from .extract import extract_answer
from .kappa import initiated_entry, kappa_first_op
from .limits import CountdownLimits, CountdownRules
from .names import KAPPA, VERIFIER
from .parser import parse_expression
from .task import CountdownTask
from .verify import RewardShaping, verify_countdown

# Plain sorted() order, which tests/unit/test_packaging.py checks (isort order differs).
__all__ = [
    "BinOp",
    "CountdownLimits",
    "CountdownRuleError",
    "CountdownRules",
    "CountdownSyntaxError",
    "CountdownTask",
    "CountdownZeroDivisionError",
    "Enumeration",
    "Expr",
    "FamilyCount",
    "KAPPA",
    "LabelWitness",
    "Num",
    "RewardShaping",
    "VERIFIER",
    "canonical_form",
    "count_families",
    "enumerate_families",
    "evaluate",
    "extract_answer",
    "initiated_entry",
    "kappa_first_op",
    "labels_of",
    "leaves",
    "parse_expression",
    "render",
    "verify_countdown",
]
