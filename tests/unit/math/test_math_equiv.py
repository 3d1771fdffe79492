"""Equivalence: every kind of answer the issue lists, read the way the gold is written."""

from __future__ import annotations

import pytest

from certd.domains.math import MathTask, verify_math
from certd.domains.verdict import Status

SAME = [
    # numbers at any magnitude, exact first
    ("2^{100}", "1267650600228229401496703205376"),
    ("10^{100}", "10^{100}"),
    (r"\frac{1}{2^{99}}", "2^{-99}"),
    ("0.5", r"\frac{1}{2}"),
    ("1000", "1,000"),
    ("7425000", "7,425,000"),
    # fractions, radicals, pi and e
    (r"\frac{6}{8}", r"\frac{3}{4}"),
    (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}"),
    (r"2\sqrt{3}", r"\sqrt{12}"),
    (r"\frac{\pi}{2}", r"\pi/2"),
    (r"e^{2}", r"e \cdot e"),
    # floats only with the declared precision (6 significant digits)
    (r"\frac{1}{3}", "0.333333"),
    (r"\pi", "3.14159"),
    # percentages
    (r"50\%", "50"),
    (r"50\%", "0.5"),
    ("0.25", r"25\%"),
    # text and units
    (r"\text{Evelyn}", r"\text{evelyn}"),
    ("5", r"5 \text{ cm}"),
    (r"12\text{ dollars}", "12"),
    # sets, intervals, unions
    (r"\{1, 2, 3\}", r"\{3, 1, 2\}"),
    ("[1, 2)", "[1,2)"),
    (r"(-\infty, 0) \cup (1, \infty)", r"(1, \infty) \cup (-\infty, 0)"),
    (r"[-2, 7]", r"-2 \le x \le 7"),
    # tuples and ordered pairs, matrices
    ("(1, 2)", "(1, 2)"),
    ("(3, -1, 2)", r"\left(3, -1, 2\right)"),
    (r"\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}", r"\begin{bmatrix}1 & 2 \\ 3 & 4\end{bmatrix}"),
    # equations and inequalities
    ("x = 3", "3"),
    ("3", "x = 3"),
    ("x = 3", "3 = x"),
    ("y = 2x + 1", "y - 2x = 1"),
    ("x > 1", "1 < x"),
    (r"x \le 5", r"5 \ge x"),
    # several answers in any order
    ("1, 2", "2, 1"),
    (r"\boxed{1} and \boxed{-2}", "-2, 1"),
    # choices
    ("C", "(C)"),
]


@pytest.mark.parametrize(("gold", "pred"), SAME)
def test_equivalent(gold: str, pred: str) -> None:
    v = verify_math(MathTask(gold=gold), f"Thus the answer is $\\boxed{{{pred}}}$.")
    assert v.status is Status.CORRECT, v.detail
    assert v.reward == 1.0


def test_declared_precision_is_the_tasks() -> None:
    task = MathTask(gold=r"\frac{1}{3}", precision_digits=2)
    assert verify_math(task, r"\boxed{0.33}").status is Status.CORRECT
    task = MathTask(gold=r"\frac{1}{3}", precision_digits=6)
    assert verify_math(task, r"\boxed{0.33}").status is Status.WRONG_ANSWER


def test_detail_carries_parsed_forms_and_version() -> None:
    v = verify_math(MathTask(gold="x = 3"), r"\boxed{3}")
    assert v.verifier == "math@1.0.0"
    assert "gold Eq(x, 3)" in v.detail and "pred 3" in v.detail
    assert v.answer == "3"


def test_wrong_and_unparsed() -> None:
    assert verify_math(MathTask(gold="3"), r"\boxed{4}").status is Status.WRONG_ANSWER
    v = verify_math(MathTask(gold="3"), r"\boxed{\frac{}{}}")
    assert v.status is Status.UNPARSED and "pred unparsed" in v.detail
