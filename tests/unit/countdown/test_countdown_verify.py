"""verify_countdown: every status, reward shaping, the rules, κ labels on the verdict."""

from __future__ import annotations

import pytest

from certd.domains.countdown import (
    KAPPA,
    VERIFIER,
    CountdownLimits,
    CountdownRules,
    CountdownTask,
    RewardShaping,
    verify_countdown,
)
from certd.domains.verdict import Status
from certd.errors import ConfigError, InvalidInputError

TASK = CountdownTask(numbers=(25, 5, 4, 3), target=83)
AT_MOST_ONCE = CountdownRules(exactly_once=False)


def test_correct_answer() -> None:
    v = verify_countdown(
        TASK, "<think>25-5=20, 20*4=80, 80+3=83</think><answer>(25-5)*4+3</answer>"
    )
    assert v.status == Status.CORRECT
    assert v.reward == 1.0
    assert v.verifier == VERIFIER == "countdown@1.0.0"
    assert v.family is not None and v.family.kappa == KAPPA
    assert v.family.label == "25,-"
    assert v.family.fields == {"operand": "25", "operator": "-"}
    assert v.initiated is not None and v.initiated.label == "25,-"
    assert v.initiated.fields["source"] == "initiated"
    assert v.answer == "(25-5)*4+3"
    assert v.canonical == "3+4*(25-5)"
    assert v.detail == ""


@pytest.mark.parametrize(
    "answer",
    ["(25-5)*4+3", "3+4*(25-5)", "(25 − 5) × 4 + 3", "4*(25-5)+3 = 83", "(25-5)*4+3 = 84"],
)
def test_renderings_of_a_solution_are_correct(answer: str) -> None:
    v = verify_countdown(TASK, f"<answer>{answer}</answer>")
    assert v.status == Status.CORRECT, v.detail
    assert v.canonical == "3+4*(25-5)"


def test_wrong_answer_is_well_formed_but_off_target() -> None:
    v = verify_countdown(TASK, "<answer>25+5+4+3</answer>")
    assert v.status == Status.WRONG_ANSWER
    assert v.reward == pytest.approx(0.1)
    assert v.detail == "expected 83, got 37"
    assert v.family is not None and v.family.label == "25,+"
    assert v.canonical == "3+4+5+25"


def test_wrong_answer_with_a_fraction() -> None:
    v = verify_countdown(TASK, "<answer>25/4+5+3</answer>")
    assert v.status == Status.WRONG_ANSWER
    assert v.detail == "expected 83, got 57/4"


@pytest.mark.parametrize(
    ("response", "needle"),
    [
        ("", "no answer found"),
        ("I give up", "no answer found"),
        ("<answer>(25-5)*4+3", "no answer found"),
        ("<answer></answer>", "empty expression"),
        ("<answer>(25-5)*4+3)</answer>", "unbalanced ')'"),
        ("<answer>25 5 4 3</answer>", "two numbers in a row"),
        ("<answer>(25-5)*4+3 = eighty-three</answer>", "unexpected character '='"),
    ],
)
def test_invalid_format(response: str, needle: str) -> None:
    v = verify_countdown(TASK, response)
    assert v.status == Status.INVALID_FORMAT
    assert v.reward == 0.0
    assert needle in v.detail
    assert v.family is None and v.canonical == ""


def test_size_limits_give_invalid_format_naming_the_limit() -> None:
    v = verify_countdown(TASK, "x" * 1_000_000)
    assert v.status == Status.INVALID_FORMAT
    assert v.detail == "response is 1000000 chars, over max_response_chars=65536"
    v = verify_countdown(TASK, "<answer>" + "1+" * 600 + "1</answer>")
    assert v.status == Status.INVALID_FORMAT
    assert "max_expression_chars=1024" in v.detail
    assert len(v.answer) == 1024
    v = verify_countdown(TASK, "<answer>" + "(" * 100 + "83" + ")" * 100 + "</answer>")
    assert "max_depth=64" in v.detail
    v = verify_countdown(TASK, "<answer>(25-5)*4+3</answer>", limits=CountdownLimits(max_tokens=5))
    assert v.status == Status.INVALID_FORMAT and "max_tokens=5" in v.detail


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        ("(25-5)*4+3+7", "uses 7, which is not among the numbers"),
        ("(25-5)*4+3*3", "uses 3 2 times"),
        ("25*4-5*4+3", "uses 4 2 times"),
        ("25*3+5+3", "uses 3 2 times"),
        ("25*4-5", "does not use [3]"),
        ("83", "uses 83"),
        ("25**2", "'**'"),
        ("abs(25-5)*4+3", "function call abs"),
        ("-25+5*4+3", "unary '-'"),
        ("25//5*4+3", "'//'"),
        ("25%5*4+3", "modulo"),
        ("(25-5)4+3", "implicit multiplication"),
    ],
)
def test_rule_violations(answer: str, needle: str) -> None:
    v = verify_countdown(TASK, f"<answer>{answer}</answer>")
    assert v.status == Status.RULE_VIOLATION
    assert v.reward == 0.0
    assert needle in v.detail


def test_a_rule_violation_still_carries_the_family_and_canonical_form() -> None:
    v = verify_countdown(TASK, "<answer>25*4-5*4+3</answer>")
    assert v.family is not None and v.family.label == "25,*"
    assert v.canonical == "3+4*25-4*5"


def test_division_by_zero_is_a_rule_violation() -> None:
    task = CountdownTask(numbers=(5, 5, 3), target=3)
    v = verify_countdown(task, "<answer>3/(5-5)</answer>")
    assert v.status == Status.RULE_VIOLATION
    assert v.detail == "division by zero"
    assert v.family is not None and v.family.label == "3,/"


def test_exactly_once_against_at_most_once() -> None:
    partial = "<answer>25*4-5</answer>"
    assert verify_countdown(TASK, partial).status == Status.RULE_VIOLATION
    loose = CountdownTask(numbers=(25, 5, 4, 3), target=95, rules=AT_MOST_ONCE)
    assert verify_countdown(loose, partial).status == Status.CORRECT
    assert verify_countdown(loose, "<answer>25*4-3</answer>").status == Status.WRONG_ANSWER
    assert verify_countdown(loose, "<answer>25*4-5*5</answer>").status == Status.RULE_VIOLATION
    single = CountdownTask(numbers=(25, 5, 4, 83), target=83, rules=AT_MOST_ONCE)
    assert verify_countdown(single, "<answer>83</answer>").status == Status.CORRECT


def test_repeated_numbers_count_as_separate_numbers() -> None:
    task = CountdownTask(numbers=(2, 2, 5), target=20)
    assert verify_countdown(task, "<answer>2*2*5</answer>").status == Status.CORRECT
    assert verify_countdown(task, "<answer>(2+2)*5</answer>").status == Status.CORRECT
    v = verify_countdown(task, "<answer>2*2*2*5</answer>")
    assert v.status == Status.RULE_VIOLATION and "uses 2 3 times" in v.detail
    v = verify_countdown(task, "<answer>4*5</answer>")
    assert v.status == Status.RULE_VIOLATION


def test_multiplication_and_division_aliases() -> None:
    task = CountdownTask(numbers=(6, 4, 3), target=8)
    v = verify_countdown(task, "<answer>6 × 4 ÷ 3</answer>")
    assert v.status == Status.CORRECT
    assert v.family is not None and v.family.label == "6,*"
    assert v.canonical == "4*6/3"


def test_fractional_intermediates_are_exact() -> None:
    task = CountdownTask(numbers=(3, 3, 8, 8), target=24)
    assert verify_countdown(task, "<answer>8/(3-8/3)</answer>").status == Status.CORRECT


def test_reward_shaping() -> None:
    shaping = RewardShaping(correct=2.0, wrong_answer=-0.5, invalid=-1.0)
    assert verify_countdown(TASK, "(25-5)*4+3", shaping=shaping).reward == 2.0
    assert verify_countdown(TASK, "25+5+4+3", shaping=shaping).reward == -0.5
    assert verify_countdown(TASK, "nothing", shaping=shaping).reward == -1.0
    assert verify_countdown(TASK, "<answer>83</answer>", shaping=shaping).reward == -1.0
    with pytest.raises(ConfigError):
        RewardShaping(correct=float("nan"))


def test_line_fallback_answers() -> None:
    v = verify_countdown(TASK, "25-5 = 20\n20*4 = 80\n(25-5)*4+3 = 83")
    assert v.status == Status.CORRECT
    assert v.initiated is not None and v.initiated.label == "25,-"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"numbers": (), "target": 1}, "countdown.numbers"),
        ({"numbers": tuple(range(1, 10)), "target": 1}, "countdown.numbers"),
        ({"numbers": (0, 1), "target": 1}, "countdown.numbers"),
        ({"numbers": (10**6 + 1,), "target": 1}, "countdown.numbers"),
        ({"numbers": (True, 2), "target": 1}, "countdown.numbers"),
        ({"numbers": "12", "target": 1}, "countdown.numbers"),
        ({"numbers": (1, 2), "target": -1}, "countdown.target"),
        ({"numbers": (1, 2), "target": 10**9 + 1}, "countdown.target"),
        ({"numbers": (1, 2), "target": 3.0}, "countdown.target"),
        ({"numbers": (1, 2), "target": 3, "rules": True}, "countdown.rules"),
    ],
)
def test_tasks_validate_themselves(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        CountdownTask(**kwargs)  # type: ignore[arg-type]  # deliberately ill-typed input
    assert err.value.field == field


def test_task_accepts_a_list_and_stores_a_tuple() -> None:
    task = CountdownTask(numbers=[1, 2], target=3)  # type: ignore[arg-type]  # a list on purpose
    assert task.numbers == (1, 2)
    assert task.rules == CountdownRules()


def test_limits_validate_themselves() -> None:
    with pytest.raises(ConfigError):
        CountdownLimits(max_depth=0)
    with pytest.raises(ConfigError):
        CountdownLimits(max_literal_digits=5_000)
    with pytest.raises(ConfigError):
        CountdownRules(exactly_once=1)  # type: ignore[arg-type]  # deliberately ill-typed
