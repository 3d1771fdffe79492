"""κ countdown.first-op.v1: the answer's label and the reasoning's initiated entry."""

from __future__ import annotations

import pytest

from certd.domains.countdown import KAPPA, initiated_entry, kappa_first_op, parse_expression
from certd.domains.verdict import Family


@pytest.mark.parametrize(
    ("text", "label", "operand", "operator"),
    [
        ("(25-5)*4+3", "25,-", "25", "-"),
        ("4*(25-5)+3", "4,*", "4", "*"),
        ("3+4*(25-5)", "3,+", "3", "+"),
        ("83", "83,", "83", ""),
        ("(83)", "83,", "83", ""),
        ("((6÷2)×3)", "6,/", "6", "/"),
        ("6×(2÷3)", "6,*", "6", "*"),
        ("1-2-3", "1,-", "1", "-"),
    ],
)
def test_kappa_first_op(text: str, label: str, operand: str, operator: str) -> None:
    fam = kappa_first_op(parse_expression(text))
    assert fam == Family(
        kappa=KAPPA, label=label, fields={"operand": operand, "operator": operator}
    )
    assert KAPPA == "countdown.first-op.v1"


@pytest.mark.parametrize(
    ("response", "label"),
    [
        ("<think>25-5=20, 20*4=80, 80+3=83</think><answer>(25-5)*4+3</answer>", "25,-"),
        ("<think>4*20=80, 80+3=83</think><answer>(25-5)*4+3</answer>", "4,*"),
        ("<think>Try 25 × (5 - 4)...</think><answer>x</answer>", "25,*"),
        ("<think>Step 1: 25 - 5 = 20</think><answer>1</answer>", "25,-"),
        ("<think>Let me try 3 ÷ 4</think><answer>1</answer>", "3,/"),
        ("<think>1234567890+1, then 7 + 2</think><answer>1</answer>", "7,+"),
        ("We need 83.\n25-5 = 20\n(25-5)*4+3", "25,-"),
        ("<think>25-5=20, and no answer yet", "25,-"),
    ],
)
def test_initiated_entry(response: str, label: str) -> None:
    fam = initiated_entry(response)
    assert fam is not None
    assert fam.label == label
    assert fam.kappa == KAPPA
    assert fam.fields["source"] == "initiated"
    operand, operator = label.split(",")
    assert fam.fields["operand"] == operand and fam.fields["operator"] == operator


@pytest.mark.parametrize(
    "response",
    [
        "<answer>(25-5)*4+3</answer>",
        "(25-5)*4+3",
        "<think>I need 83 from 25, 5, 4 and 3.</think><answer>(25-5)*4+3</answer>",
        "<think>25 = 25</think><answer>1</answer>",
        "<answer>1</answer> 25-5",
        "",
    ],
)
def test_no_initiated_entry(response: str) -> None:
    assert initiated_entry(response) is None


def test_initiated_entry_and_answer_label_can_differ() -> None:
    response = "<think>4*20=80, 80+3=83</think><answer>(25-5)*4+3</answer>"
    initiated = initiated_entry(response)
    assert initiated is not None and initiated.label == "4,*"
    assert kappa_first_op(parse_expression("(25-5)*4+3")).label == "25,-"


def test_initiated_entry_is_linear_on_huge_text() -> None:
    assert initiated_entry("1" * 1_000_000) is None
    assert initiated_entry("1 " * 500_000) is None
    assert initiated_entry("1" * 100_000 + " + 2") is None  # the literal is over 9 digits
