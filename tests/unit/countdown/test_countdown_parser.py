"""Parser: precedence, aliases, typed errors for forbidden constructs and limits, bombs."""

from __future__ import annotations

from fractions import Fraction

import pytest

from certd.domains.countdown import (
    BinOp,
    CountdownLimits,
    CountdownRuleError,
    CountdownSyntaxError,
    CountdownZeroDivisionError,
    Num,
    canonical_form,
    evaluate,
    labels_of,
    leaves,
    parse_expression,
    render,
)
from certd.errors import InvalidInputError, LimitExceededError

BIG = CountdownLimits(
    max_expression_chars=200_000, max_depth=20_000, max_tokens=200_000, max_response_chars=400_000
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2+3*4", 14),
        ("(2+3)*4", 20),
        ("10-4-3", 3),
        ("100/10/5", 2),
        ("8/3*3", 8),
        ("2*3-4/2", 4),
        ("2-3", -1),
        ("7/2", Fraction(7, 2)),
        ("((7))", 7),
        (" 1 +\t2\n", 3),
        ("0", 0),
        ("007+1", 8),
    ],
)
def test_values_follow_standard_precedence(text: str, value: Fraction) -> None:
    assert evaluate(parse_expression(text)) == value


def test_operators_are_left_associative() -> None:
    assert parse_expression("10-4-3") == BinOp("-", BinOp("-", Num(10), Num(4)), Num(3))
    assert parse_expression("8/4*2") == BinOp("*", BinOp("/", Num(8), Num(4)), Num(2))
    assert parse_expression("1+2*3") == BinOp("+", Num(1), BinOp("*", Num(2), Num(3)))


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("3×4", "3*4"),
        ("12÷4", "12/4"),
        ("3·4", "3*4"),
        ("3∗4", "3*4"),
        ("12∕4", "12/4"),
        ("5−2", "5-2"),
        ("5–2", "5-2"),
        ("(25 − 5) × 4 + 3", "(25-5)*4+3"),
    ],
)
def test_aliases_normalise(text: str, rendered: str) -> None:
    assert render(parse_expression(text)) == rendered


def test_render_keeps_the_tree() -> None:
    for text in ["1-(2-3)", "1-(2+3)", "1/(2/3)", "1/(2*3)", "(1+2)*3", "1+(2+3)", "1*(2*3)"]:
        expr = parse_expression(text)
        assert render(expr) == text
        assert parse_expression(render(expr)) == expr


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("2**3", "'**'"),
        ("44**19**35", "'**'"),
        ("2×*3", "'**'"),
        ("7//2", "'//'"),
        ("7%2", "modulo"),
        ("2^3", "'^'"),
        ("abs(3)", "function call abs"),
        ("__import__('os').system('x')", "function call __import__"),
        ("x+1", "identifier 'x'"),
        ("3 x 4", "identifier 'x'"),
        ("-3+5", "unary '-'"),
        ("3*-2", "unary '-'"),
        ("+3", "unary '+'"),
        ("2.5*2", "decimal point"),
        ("4(5)", "implicit multiplication"),
        ("(1+2)(3)", "implicit multiplication"),
        ("(1+2)3", "implicit multiplication"),
        ("3!", "factorial"),
        ("[1]", "bracket"),
    ],
)
def test_forbidden_constructs_raise_rule_errors(text: str, needle: str) -> None:
    with pytest.raises(CountdownRuleError) as err:
        parse_expression(text)
    assert needle in str(err.value)
    assert err.value.field == "countdown.expression"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("1+", "ends with an operator"),
        ("(1+2", "unbalanced '('"),
        ("1+2)", "unbalanced ')'"),
        ("()", "missing operand"),
        ("1 2", "two numbers in a row"),
        ("*3", "missing operand"),
        ("3 $ 4", "unexpected character"),
        ("1+=2", "unexpected character '='"),
        ("'3'", "unexpected character"),
    ],
)
def test_unparseable_text_raises_syntax_errors(text: str, needle: str) -> None:
    with pytest.raises(CountdownSyntaxError) as err:
        parse_expression(text)
    assert needle in str(err.value)


@pytest.mark.parametrize(
    ("text", "limits", "needle"),
    [
        ("1+" * 600 + "1", CountdownLimits(), "1201 chars, over max_expression_chars=1024"),
        ("1234567890", CountdownLimits(), "10 digits, over max_literal_digits=9"),
        ("(" * 65 + "1" + ")" * 65, CountdownLimits(), "max_depth=64"),
        ("1+" * 257 + "1", CountdownLimits(), "over max_tokens=512"),
        ("((1))", CountdownLimits(max_depth=1), "max_depth=1"),
        ("1+2+3", CountdownLimits(max_tokens=4), "over max_tokens=4"),
    ],
)
def test_each_limit_raises_and_names_itself(
    text: str, limits: CountdownLimits, needle: str
) -> None:
    with pytest.raises(LimitExceededError) as err:
        parse_expression(text, limits)
    assert needle in str(err.value)


def test_limits_at_their_bound_are_accepted() -> None:
    assert evaluate(parse_expression("(" * 64 + "1" + ")" * 64)) == 1
    assert evaluate(parse_expression("999999999")) == 999_999_999
    assert len(leaves(parse_expression("1+" * 255 + "1"))) == 256


@pytest.mark.parametrize(
    "bomb",
    [
        "44**19**35",
        "__import__('os').system('x')",
        "1" * 1_000_000,
        "(" * 10_000 + "1" + ")" * 10_000,
        "9" * 5000,
        "(" * 1_000_000,
    ],
)
def test_bombs_get_a_typed_error(bomb: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_expression(bomb)


def test_ten_thousand_nested_parentheses_do_not_recurse() -> None:
    text = "(" * 10_000 + "1+2" + ")" * 10_000
    with pytest.raises(LimitExceededError):
        parse_expression(text, CountdownLimits(max_expression_chars=100_000))
    assert evaluate(parse_expression(text, BIG)) == 3


def test_deep_trees_are_safe_for_every_traversal() -> None:
    left_deep = parse_expression("1-" * 10_000 + "1", BIG)
    assert evaluate(left_deep) == 1 - 10_000
    assert parse_expression(render(left_deep), BIG) == left_deep
    assert len(leaves(left_deep)) == 10_001
    assert canonical_form(left_deep).startswith("0-1-1")  # 1 − 1 cancels (issue 30)
    assert labels_of(left_deep) == {(1, "-")}
    right_deep = parse_expression("2/(" * 5_000 + "2" + ")" * 5_000, BIG)
    assert evaluate(right_deep) in (1, 2)
    assert parse_expression(render(right_deep), BIG) == right_deep
    assert labels_of(right_deep) == {(2, "*"), (2, "/")}


def test_division_by_zero_is_a_typed_error() -> None:
    with pytest.raises(CountdownZeroDivisionError):
        evaluate(parse_expression("5/(3-3)"))
    assert issubclass(CountdownZeroDivisionError, CountdownRuleError)


def test_nodes_validate_themselves() -> None:
    with pytest.raises(ValueError):
        Num(-1)
    with pytest.raises(ValueError):
        BinOp("**", Num(1), Num(2))
