"""Answer extraction: last <answer> wins, else the last parseable line, '= N' stripped."""

from __future__ import annotations

import pytest

from certd.domains.countdown import extract_answer


@pytest.mark.parametrize(
    ("response", "answer"),
    [
        ("<answer>(25-5)*4+3</answer>", "(25-5)*4+3"),
        ("<answer>1+2</answer> then <answer> 3+4 </answer>", "3+4"),
        ("<think>2+2</think>\n<answer>\n(25-5)*4+3\n</answer>\nbye", "(25-5)*4+3"),
        ("<answer>(25-5)*4+3 = 83</answer>", "(25-5)*4+3"),
        ("<answer>(25-5)*4+3=84</answer>", "(25-5)*4+3"),
        ("<answer></answer>", ""),
        ("<answer>abs(3)</answer>", "abs(3)"),
        ("<answer>1+2</answer><answer>3+4", "1+2"),
        ("<answer>1+2 = x</answer>", "1+2 = x"),
    ],
)
def test_last_complete_answer_tag_wins(response: str, answer: str) -> None:
    assert extract_answer(response) == answer


@pytest.mark.parametrize(
    ("response", "answer"),
    [
        ("(25-5)*4+3", "(25-5)*4+3"),
        ("First 25-5 = 20.\n(25-5)*4+3 = 83\nThat is it.", "(25-5)*4+3"),
        ("1+2\n3+4\n\n  \n", "3+4"),
        ("3+4\n(1+\n", "3+4"),
        ("3 × 4\r\n", "3 × 4"),
        ("25 - 5 = 20\n20 * 4 = 80\n80 + 3 = 83", "80 + 3"),
        ("83", "83"),
    ],
)
def test_without_tags_the_last_parseable_line_is_the_answer(response: str, answer: str) -> None:
    assert extract_answer(response) == answer


@pytest.mark.parametrize(
    "response",
    [
        "",
        "I do not know.",
        "The answer is (25-5)*4+3",
        "<answer>(25-5)*4+3",
        "(25-5)*4+3\n<answer>",
        "<think>25-5=20</think>",
        "= 83",
    ],
)
def test_nothing_parseable_gives_none(response: str) -> None:
    assert extract_answer(response) is None


def test_an_open_answer_tag_disables_the_line_fallback() -> None:
    assert extract_answer("25-5=20\n<answer>(25-5)*4+3") is None


def test_huge_inputs_are_scanned_linearly() -> None:
    assert extract_answer("1+\n" * 100_000) is None
    assert extract_answer("(" * 1_000_000) is None
    assert extract_answer("<answer>" * 100_000 + "1</answer>") == "1"
    assert extract_answer("9" * 1_000_000 + "\n1+1") == "1+1"
