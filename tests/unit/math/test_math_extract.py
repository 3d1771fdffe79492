"""Answer extraction: boxes, math delimiters, answer phrases, plain text, choices."""

from __future__ import annotations

import pytest

from certd.domains.math import ExtractConfig, MathLimits, extract_answer
from certd.domains.math.errors import MathLimitError, MathUnparsedError


def test_last_box_by_default_with_nested_braces() -> None:
    text = r"first \boxed{1} then \boxed{\frac{\sqrt{2}}{2}} done"
    got = extract_answer(text)
    assert (got.text, got.source) == (r"\frac{\sqrt{2}}{2}", "boxed")


def test_first_box_when_configured() -> None:
    assert extract_answer(r"\boxed{1} \boxed{2}", ExtractConfig(boxed="first")).text == "1"


def test_fbox_and_escaped_braces() -> None:
    assert extract_answer(r"\fbox{\{1, 2\}}").text == r"\{1, 2\}"


@pytest.mark.parametrize(
    ("text", "want", "source"),
    [
        (r"so \[ x = \frac{1}{2} \] and thus \[42\]", "42", "display"),
        ("we get $$7$$", "7", "display"),
        (r"we get $3$ and then $x+1$", "x+1", "inline"),
        (r"we get \(5\)", "5", "inline"),
        ("Therefore, the final answer is 17. Done", "17", "phrase"),
        ("Answer: $2\\pi$", "2\\pi", "phrase"),
        ("The largest n is 34 and so the answer is the largest n, 34.", "34", "phrase"),
        ("\\frac{3}{4}", "\\frac{3}{4}", "plain"),
        ("We computed it to be 1,000.5 in total", "1,000.5", "plain"),
    ],
)
def test_sources(text: str, want: str, source: str) -> None:
    got = extract_answer(text)
    assert (got.text, got.source) == (want, source)


def test_priority_is_configurable() -> None:
    text = r"The answer is 5. Check: \boxed{6}"
    assert extract_answer(text).text == "6"
    assert extract_answer(text, ExtractConfig(priority=("phrase", "boxed"))).text == "5"


@pytest.mark.parametrize(
    ("text", "letter"),
    [("The answer is (C).", "C"), (r"\boxed{B}", "B"), (r"\boxed{\text{(D)}}", "D")],
)
def test_choice_letters(text: str, letter: str) -> None:
    assert extract_answer(text, choices=True).text == letter


@pytest.mark.parametrize("text", [r"\boxed{3", r"\boxed{1} and \boxed{\frac{1}{2}", "", "no math"])
def test_truncated_or_missing_is_unparsed(text: str) -> None:
    with pytest.raises(MathUnparsedError):
        extract_answer(text)


def test_caps() -> None:
    with pytest.raises(MathLimitError, match="max_response_chars"):
        extract_answer("1" * 1_100_000)
    with pytest.raises(MathLimitError, match="max_brace_depth"):
        extract_answer("\\boxed" + "{" * 10_000 + "}" * 10_000)
    with pytest.raises(MathLimitError, match="max_answer_chars"):
        extract_answer(r"\boxed{" + "1+" * 600 + "1}", limits=MathLimits())


def test_bad_config_is_refused() -> None:
    with pytest.raises(ValueError, match="priority"):
        ExtractConfig(priority=("nope",))
    with pytest.raises(ValueError, match="boxed"):
        ExtractConfig(boxed="middle")
