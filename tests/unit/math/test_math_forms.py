"""Equal forms that used to be rejected (issue 28), each with a wrong control.

Repeating decimals, Unicode (``x²``, ``½``, ``√2``, ``∞``, en dash), the imaginary unit,
degrees against radians, ``\\infty + 1``.
"""

from __future__ import annotations

import pytest

from certd.domains.math import MathTask, verify_math
from certd.domains.verdict import Status

EQUAL = [
    (r"\frac{1}{3}", r"\boxed{0.\overline{3}}"),
    (r"\frac{1}{3}", r"\boxed{0.(3)}"),
    (r"\frac{7}{6}", r"\boxed{1.1\overline{6}}"),
    ("x^2", r"\boxed{x²}"),
    (r"\frac{1}{2}", r"\boxed{½}"),
    (r"\sqrt{2}", r"\boxed{√2}"),
    (r"\infty", r"\boxed{∞}"),
    ("-5", r"\boxed{–5}"),
    ("1", r"\boxed{i^4}"),
    ("-1", r"\boxed{e^{i\pi}}"),
    (r"\frac{\pi}{2}", r"\boxed{90^\circ}"),
    ("90", r"\boxed{90^\circ}"),
    (r"\infty", r"\boxed{\infty+1}"),
]

WRONG = [
    (r"\frac{1}{3}", r"\boxed{0.3}"),
    (r"\frac{1}{3}", r"\boxed{0.(33)4}"),
    (r"\frac{1}{6}", r"\boxed{0.1\overline{7}}"),
    ("x^3", r"\boxed{x²}"),
    (r"\frac{1}{3}", r"\boxed{½}"),
    (r"\sqrt{3}", r"\boxed{√2}"),
    (r"-\infty", r"\boxed{∞}"),
    ("5", r"\boxed{–5}"),
    ("1", r"\boxed{i^2}"),
    ("1", r"\boxed{e^{i\pi}}"),
    (r"\frac{\pi}{3}", r"\boxed{90^\circ}"),
    (r"-\infty", r"\boxed{\infty+1}"),
]


@pytest.mark.parametrize(("gold", "response"), EQUAL)
def test_equal_form_is_correct(gold: str, response: str) -> None:
    v = verify_math(MathTask(gold=gold), response)
    assert v.status is Status.CORRECT, v.detail


@pytest.mark.parametrize(("gold", "response"), WRONG)
def test_wrong_control_is_not_correct(gold: str, response: str) -> None:
    v = verify_math(MathTask(gold=gold), response)
    assert v.status in (Status.WRONG_ANSWER, Status.UNPARSED), v.detail
