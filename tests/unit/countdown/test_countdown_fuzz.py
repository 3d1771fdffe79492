"""Property tests: the verifier never raises; parse, render and normal form round-trip."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from certd.domains.countdown import (
    BinOp,
    CountdownRules,
    CountdownTask,
    Expr,
    Num,
    canonical_form,
    evaluate,
    extract_answer,
    initiated_entry,
    kappa_first_op,
    labels_of,
    parse_expression,
    rational,
    render,
    verify_countdown,
)
from certd.domains.countdown.canonical import canon_labels, canon_of, reduce_identities
from certd.domains.countdown.errors import CountdownZeroDivisionError
from certd.domains.countdown.rational import Rat
from certd.domains.verdict import Status, Verdict
from certd.errors import InvalidInputError

PIECES = [
    *"0123456789",
    "25", "5", "4", "3", "83", "999999999", "1234567890",
    *"+-*/()×÷·−= \n\t",
    "**", "//", "%", "^", ".", "abs(", "__import__('os')", "x", "é", "\x00", "\ud7ff",
    "<answer>", "</answer>", "<think>", "</think>", "<answ", "= 83",
]  # fmt: skip
grammar_junk = st.lists(st.sampled_from(PIECES), max_size=60).map("".join)
tasks = st.builds(
    CountdownTask,
    numbers=st.lists(st.integers(1, 100), min_size=1, max_size=6).map(tuple),
    target=st.integers(0, 1000),
    rules=st.builds(CountdownRules, exactly_once=st.booleans()),
)


def _check(v: Verdict) -> None:
    assert isinstance(v, Verdict)
    assert v.status in {
        Status.CORRECT,
        Status.WRONG_ANSWER,
        Status.INVALID_FORMAT,
        Status.RULE_VIOLATION,
    }
    assert (v.family is None) == (v.canonical == "")


@settings(max_examples=300, deadline=None)
@given(tasks, st.text(max_size=200))
def test_verify_never_raises_on_arbitrary_text(task: CountdownTask, text: str) -> None:
    _check(verify_countdown(task, text))


@settings(max_examples=500, deadline=None)
@given(tasks, grammar_junk)
def test_verify_never_raises_on_grammar_junk(task: CountdownTask, text: str) -> None:
    _check(verify_countdown(task, text))
    _check(verify_countdown(task, f"<answer>{text}</answer>"))
    extract_answer(text)
    initiated_entry(text)


@settings(max_examples=500, deadline=None)
@given(grammar_junk)
def test_parser_raises_only_typed_errors(text: str) -> None:
    try:
        expr = parse_expression(text)
    except InvalidInputError:
        return
    assert parse_expression(render(expr)) == expr


def exprs(max_leaves: int = 8) -> st.SearchStrategy[Expr]:
    leaf = st.integers(0, 10**9 - 1).map(Num)
    return st.recursive(
        leaf,
        lambda sub: st.builds(BinOp, st.sampled_from("+-*/"), sub, sub),
        max_leaves=max_leaves,
    )


@settings(max_examples=500, deadline=None)
@given(exprs())
def test_parse_render_parse_round_trips(expr: Expr) -> None:
    text = render(expr)
    assert parse_expression(text) == expr
    assert render(parse_expression(text)) == text


@settings(max_examples=500, deadline=None)
@given(exprs())
def test_normal_form_is_an_equivalent_fixed_point(expr: Expr) -> None:
    form = canonical_form(expr)
    again = parse_expression(form)
    assert canonical_form(again) == form
    # Identity operations are removed (issue 30): the form carries the labels of its reduction.
    assert labels_of(again) == canon_labels(reduce_identities(canon_of(expr)))
    if canonical_form(expr) == canon_of(expr).text:
        assert labels_of(again) == labels_of(expr)
    first = kappa_first_op(expr)
    assert (int(first.fields["operand"]), first.fields["operator"]) in labels_of(expr)
    try:
        value: Fraction | None = evaluate(expr)
    except CountdownZeroDivisionError:
        value = None
    if value is not None:
        assert evaluate(again) == value


def _to_fraction(r: Rat) -> Fraction:
    return Fraction(r) if isinstance(r, int) else Fraction(*r)


def _from_fraction(f: Fraction) -> Rat:
    return f.numerator if f.denominator == 1 else (f.numerator, f.denominator)


rationals = st.fractions(max_denominator=50).filter(lambda f: abs(f) < 10**6).map(_from_fraction)


@settings(max_examples=500, deadline=None)
@given(rationals, rationals)
def test_enumeration_arithmetic_matches_fraction(a: Rat, b: Rat) -> None:
    fa, fb = _to_fraction(a), _to_fraction(b)
    assert rational.add(a, b) == _from_fraction(fa + fb)
    assert rational.sub(a, b) == _from_fraction(fa - fb)
    assert rational.mul(a, b) == _from_fraction(fa * fb)
    if fb:
        assert rational.div(a, b) == _from_fraction(fa / fb)
