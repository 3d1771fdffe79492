"""Check one Countdown response: the verdict, its reward and its κ labels.

Example:
    >>> from certd.domains.countdown import CountdownTask, verify_countdown
    >>> task = CountdownTask(numbers=(25, 5, 4, 3), target=83)
    >>> v = verify_countdown(task, "<think>25-5=20</think><answer>(25-5)*4+3</answer>")
    >>> v.status.name, v.reward, v.family.label, v.initiated.label, v.canonical
    ('CORRECT', 1.0, '25,-', '25,-', '3+4*(25-5)')

Statuses:

* CORRECT: the answer parses, respects the rules and equals the target.
* WRONG_ANSWER: it parses and respects the rules but its value differs from the target.
* INVALID_FORMAT: no answer was found, it does not parse, or the response or answer is over a
  size limit (the detail names the limit).
* RULE_VIOLATION: a number not given, a number used more often than given, a given number left
  unused under exactly-once, a forbidden construct (``**``, ``//``, ``%``, identifiers, function
  calls, unary minus, implicit multiplication), or division by zero.

``family`` and ``canonical`` are filled whenever the answer parses, whatever the status.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from certd.domains.verdict import Family, Status, Verdict
from certd.errors import ConfigError, LimitExceededError

from .canonical import canonical_form
from .errors import CountdownRuleError, CountdownSyntaxError
from .expr import Expr, first_op, leaves, value_of
from .extract import locate_answer
from .kappa import family, scan_initiated
from .limits import DEFAULT_LIMITS, CountdownLimits
from .names import VERIFIER
from .parser import parse_expression
from .task import CountdownTask

__all__ = ["RewardShaping", "verify_countdown"]


@dataclass(frozen=True, slots=True)
class RewardShaping:
    """Reward per status (TinyZero's shaping by default).

    Attributes:
        correct: reward for CORRECT.
        wrong_answer: reward for WRONG_ANSWER (well-formed but wrong).
        invalid: reward for INVALID_FORMAT and RULE_VIOLATION.
    """

    correct: float = 1.0
    wrong_answer: float = 0.1
    invalid: float = 0.0

    def __post_init__(self) -> None:
        for name in ("correct", "wrong_answer", "invalid"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise ConfigError(f"RewardShaping.{name} must be a finite number, got {value!r}")


DEFAULT_SHAPING = RewardShaping()


def verify_countdown(
    task: CountdownTask,
    response: str,
    *,
    limits: CountdownLimits = DEFAULT_LIMITS,
    shaping: RewardShaping = DEFAULT_SHAPING,
    with_canonical: bool = True,
) -> Verdict:
    """Verify a response to a Countdown task. Never raises for any response string.

    Args:
        task: the (already validated) task.
        response: the model's full text.
        limits: size limits; a response over ``max_response_chars`` is rejected before it is
            read.
        shaping: rewards per status.
        with_canonical: compute the answer's canonical form (the pseudo-fork gate needs it;
            plain verification can skip the cost).

    Returns:
        The verdict: status, shaped reward, ``verifier=VERIFIER``, the answer's κ family,
        the initiated entry of the reasoning (when it writes one), a detail, the answer text
        (cut to ``max_expression_chars``) and its canonical form.
    """
    if len(response) > limits.max_response_chars:
        return _verdict(
            Status.INVALID_FORMAT,
            shaping,
            detail=f"response is {len(response)} chars, "
            f"over max_response_chars={limits.max_response_chars}",
        )
    located = locate_answer(response, limits)
    if located is None:
        return _verdict(
            Status.INVALID_FORMAT,
            shaping,
            detail="no answer found",
            initiated=scan_initiated(response, limits.max_literal_digits),
        )
    answer, region, parsed = located
    initiated = scan_initiated(response[:region], limits.max_literal_digits)
    shown = answer[: limits.max_expression_chars]
    try:
        expr = parse_expression(answer, limits) if parsed is None else parsed
    except LimitExceededError as e:
        return _verdict(Status.INVALID_FORMAT, shaping, str(e), initiated, answer=shown)
    except CountdownSyntaxError as e:
        return _verdict(Status.INVALID_FORMAT, shaping, str(e), initiated, answer=shown)
    except CountdownRuleError as e:
        return _verdict(Status.RULE_VIOLATION, shaping, str(e), initiated, answer=shown)
    return _judge(task, expr, shaping, initiated, answer, with_canonical)


def _judge(
    task: CountdownTask,
    expr: Expr,
    shaping: RewardShaping,
    initiated: Family | None,
    answer: str,
    with_canonical: bool,
) -> Verdict:
    """The verdict on a parsed answer: number rules, then its value against the target."""
    operand, operator = first_op(expr)
    fam = family(operand, operator)
    canonical = canonical_form(expr) if with_canonical else ""
    used = leaves(expr)
    misuse = _misuse(task, used)
    if misuse:
        return _verdict(Status.RULE_VIOLATION, shaping, misuse, initiated, fam, answer, canonical)
    try:
        value = value_of(expr)
    except CountdownRuleError as e:
        return _verdict(Status.RULE_VIOLATION, shaping, str(e), initiated, fam, answer, canonical)
    if value == task.target:
        return _verdict(Status.CORRECT, shaping, "", initiated, fam, answer, canonical)
    return _verdict(
        Status.WRONG_ANSWER,
        shaping,
        f"expected {task.target}, got {value}",
        initiated,
        fam,
        answer,
        canonical,
    )


def _misuse(task: CountdownTask, used: list[int]) -> str:
    """Why the literals break the number rules, or "" when they respect them."""
    given = task.numbers
    if len(used) == len(given) and sorted(used) == sorted(given):
        return ""
    have = Counter(given)
    for n, count in Counter(used).items():
        if n not in have:
            return f"uses {n}, which is not among the numbers {list(given)}"
        if count > have[n]:
            return f"uses {n} {count} times, but it is given {have[n]} time(s)"
    if task.rules.exactly_once:
        missing = sorted((have - Counter(used)).elements())
        return f"does not use {missing}; every number must be used exactly once"
    return ""


def _verdict(
    status: Status,
    shaping: RewardShaping,
    detail: str = "",
    initiated: Family | None = None,
    fam: Family | None = None,
    answer: str = "",
    canonical: str = "",
) -> Verdict:
    if status == Status.CORRECT:
        reward = shaping.correct
    elif status == Status.WRONG_ANSWER:
        reward = shaping.wrong_answer
    else:
        reward = shaping.invalid
    return Verdict(
        status=status,
        reward=float(reward),
        verifier=VERIFIER,
        family=fam,
        initiated=initiated,
        detail=detail,
        answer=answer,
        canonical=canonical,
    )
