"""canonical_form (pseudo-fork normal form) and labels_of."""

from __future__ import annotations

import pytest

from certd.domains.countdown import (
    canonical_form,
    evaluate,
    kappa_first_op,
    labels_of,
    parse_expression,
)


def canon(text: str) -> str:
    return canonical_form(parse_expression(text))


@pytest.mark.parametrize(
    "renderings",
    [
        ["(25-5)*4+3", "3+4*(25-5)", "3+(25-5)*4", "4*(25-5)+3", "(4*(25-5))+3"],
        ["1+2+3", "3+(2+1)", "(1+3)+2", "2+1+3"],
        ["10-(4-3)", "10-4+3", "3+10-4", "10+(3-4)"],
        ["10-(4+3)", "10-4-3", "10-3-4"],
        ["8/(4/2)", "8/4*2", "2*8/4", "8*2/4"],
        ["8/(4*2)", "8/4/2", "8/2/4"],
        ["6×(2÷3)", "6*2/3", "2*6/3"],
    ],
)
def test_commuted_and_reassociated_renderings_share_a_form(renderings: list[str]) -> None:
    forms = {canon(r) for r in renderings}
    assert len(forms) == 1, forms
    (form,) = forms
    assert evaluate(parse_expression(form)) == evaluate(parse_expression(renderings[0]))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("(25-5)*4+3", "25*4-5*4+3"),  # distributed: same value, different solution
        ("2*(3+4)", "2*3+2*4"),
        ("1+2", "3"),
        ("4-2", "2"),
        ("2+2", "2*2"),
        ("8/4/2", "8/(4/2)"),
        ("2*2-2", "2"),
        ("3*4+5", "4*5-3"),
    ],
)
def test_different_solutions_stay_different(a: str, b: str) -> None:
    assert canon(a) != canon(b)


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ("(25-5)*4+3", "3+4*(25-5)"),
        ("25*4-5*4+3", "3+4*25-4*5"),
        ("83", "83"),
        ("(((7)))", "7"),
        ("1-(2-(3-4))", "1+3-2-4"),
        ("100/(5-(2+1))", "100/(5-1-2)"),
        ("(2+3)*(1+1)/(4-2)", "(1+1)*(2+3)/(4-2)"),
    ],
)
def test_normal_form_text(text: str, form: str) -> None:
    assert canon(text) == form


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("83", {(83, "")}),
        ("(25-5)*4+3", {(25, "-"), (4, "*"), (3, "+")}),
        ("25*4-5*4+3", {(25, "*"), (4, "*"), (3, "+"), (3, "-")}),
        ("10-4-3", {(10, "-")}),
        ("10-(4-3)", {(10, "-"), (10, "+"), (3, "+"), (3, "-")}),
        ("8/4/2", {(8, "/")}),
        ("8/(4/2)", {(8, "/"), (8, "*"), (2, "*"), (2, "/")}),
        ("2+2", {(2, "+")}),
        ("(1+2)*(3+4)", {(1, "+"), (2, "+"), (3, "+"), (4, "+")}),
        ("(1+2)/(3+4)", {(1, "+"), (2, "+")}),
        ("6×(2÷3)", {(6, "*"), (6, "/"), (2, "*"), (2, "/")}),
    ],
)
def test_labels_of(text: str, labels: set[tuple[int, str]]) -> None:
    expr = parse_expression(text)
    assert labels_of(expr) == labels
    first = kappa_first_op(expr)
    assert (int(first.fields["operand"]), first.fields["operator"]) in labels
