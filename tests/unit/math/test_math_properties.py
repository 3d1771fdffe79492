"""Property tests: equivalence is exact on numbers, rewritings agree, verify never raises."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certd.domains.math import MathTask, verify_math
from certd.domains.math.route import ROUTES
from certd.domains.verdict import Status

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ints = st.integers(min_value=-(10**30), max_value=10**30)
fracs = st.fractions(max_denominator=10**6).filter(lambda f: f.denominator > 1)


def _boxed(x: str) -> str:
    return f"so the answer is $\\boxed{{{x}}}$"


def _latex(f: Fraction) -> str:
    sign = "-" if f < 0 else ""
    return f"{sign}\\frac{{{abs(f.numerator)}}}{{{f.denominator}}}"


@SETTINGS
@given(ints, ints)
def test_integers_equal_iff_equal(a: int, b: int) -> None:
    got = verify_math(MathTask(gold=str(a)), _boxed(str(b))).status
    assert (got is Status.CORRECT) == (a == b)


@SETTINGS
@given(fracs, st.integers(min_value=2, max_value=50))
def test_fraction_rewritings_agree(f: Fraction, k: int) -> None:
    unreduced = Fraction(f.numerator * k, f.denominator * k)
    text = f"{'-' if f < 0 else ''}\\frac{{{abs(f.numerator) * k}}}{{{f.denominator * k}}}"
    assert unreduced == f
    assert verify_math(MathTask(gold=_latex(f)), _boxed(text)).status is Status.CORRECT
    plain = f"{f.numerator}/{f.denominator}"
    assert verify_math(MathTask(gold=_latex(f)), _boxed(plain)).status is Status.CORRECT


@SETTINGS
@given(fracs, fracs)
def test_distinct_fractions_differ(f: Fraction, g: Fraction) -> None:
    got = verify_math(MathTask(gold=_latex(f)), _boxed(_latex(g))).status
    assert (got is Status.CORRECT) == (f == g)


@SETTINGS
@given(st.lists(st.integers(-50, 50), min_size=1, max_size=5, unique=True), st.randoms())
def test_several_answers_in_any_order(values: list[int], rnd: object) -> None:
    shuffled = list(values)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]  # hypothesis's Random
    gold = ", ".join(map(str, values))
    pred = ", ".join(map(str, shuffled))
    assert verify_math(MathTask(gold=gold), _boxed(pred)).status is Status.CORRECT


@SETTINGS
@given(st.text(max_size=300))
def test_verify_never_raises(text: str) -> None:
    v = verify_math(MathTask(gold="42"), text)
    assert v.status in {Status.CORRECT, Status.WRONG_ANSWER, Status.UNPARSED}
    assert v.family is not None and v.family.label in ROUTES


@SETTINGS
@given(st.text(alphabet="{}\\boxed()[]$^_0123456789+-*/frac ", max_size=200))
def test_verify_never_raises_on_latexish_noise(text: str) -> None:
    v = verify_math(MathTask(gold=r"\frac{1}{2}"), text)
    assert v.status in {Status.CORRECT, Status.WRONG_ANSWER, Status.UNPARSED}
