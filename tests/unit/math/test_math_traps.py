"""The trap suite: pairs that must be judged different (no false positive is allowed)."""

from __future__ import annotations

import pytest

from certd.domains.math import MathTask, verify_math
from certd.domains.verdict import Status

TRAPS = [
    (r"\frac{1}{2^{99}}", r"\frac{1}{2^{98}}"),
    ("1/2^{99}", "1/2^{98}"),
    (r"1-\frac{1}{e}", r"1+\frac{1}{e}"),
    ("4", r"4\sqrt{2}"),
    ("x^2 - 1 = 0", "x^2 - 4 = 0"),
    ("x + 1 = x + 1", "2x = 2x"),
    ("x - x = 0", "y - y = 0"),
    (r"\pi", "3.14"),
    ("e", "2.718"),
    (r"\frac{1}{3}", "0.333"),
    ("[1,2]", "(1,2)"),
    ("(1,2]", "[1,2)"),
    (r"\{1,2\}", r"\{1,2,3\}"),
    ("(1,2)", "(2,1)"),
    ("x > 1", "x < 1"),
    (r"x \geq 1", "x > 1"),
    (r"\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}", r"\begin{pmatrix}1 & 3 \\ 2 & 4\end{pmatrix}"),
    ("10^{100}", "10^{100}+1"),
    ("2^{64}", "18446744073709551615"),
    (r"e^{\pi\sqrt{163}}", "640320^3+744"),
    (r"50\%", "5"),
    (r"\frac{\sqrt{2}}{2}", r"\frac{\sqrt{3}}{2}"),
    ("x = 3", "x = -3"),
    ("x = 3", "y = 3"),
    (r"\text{Evelyn}", r"\text{Emily}"),
    (r"\sqrt{x^2}", "x"),
    (r"\frac{\pi}{2}", r"\frac{\pi}{3}"),
    ("(-\\infty, 1)", "(-\\infty, 1]"),
    (r"(-\infty, 0) \cup (1, \infty)", r"(-\infty, 0] \cup (1, \infty)"),
    ("1, 2", "1, 3"),
    ("C", "(B)"),
    ("-5", "5"),
    ("0", "0.0000001"),
    ("1000000", "1000001"),
    (r"\sin x", r"\cos x"),
    (r"\log_2 8", "4"),
    ("3x+2", "3x-2"),
]


@pytest.mark.parametrize(("gold", "pred"), TRAPS)
def test_trap_is_judged_different(gold: str, pred: str) -> None:
    v = verify_math(MathTask(gold=gold), f"The answer is $\\boxed{{{pred}}}$.")
    assert v.status is not Status.CORRECT, v.detail
    assert v.reward == 0.0


@pytest.mark.parametrize(("gold", "pred"), TRAPS)
def test_trap_controls_are_correct(gold: str, pred: str) -> None:
    """Each trap's gold equals itself, so the trap above fails for the right reason."""
    v = verify_math(MathTask(gold=gold), f"The answer is $\\boxed{{{gold}}}$.")
    assert v.status is Status.CORRECT, v.detail


def test_truncated_answer_is_unparsed_never_equal() -> None:
    v = verify_math(MathTask(gold="3"), r"so the answer is \boxed{3")
    assert v.status is Status.UNPARSED
    v = verify_math(MathTask(gold="3"), r"\boxed{3} and finally \boxed{3")
    assert v.status is Status.UNPARSED
