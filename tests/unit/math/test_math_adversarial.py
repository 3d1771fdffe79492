"""An adversarial generator: golds × perturbations that a policy under RL could find.

For each gold of a corpus, ``perturbations`` writes answers that differ from it by a little:
±1 unit of the last printed digit, ×(1+10^-k), +10^-k, a term that vanishes on a lattice
(``\\sin(k\\pi x)``), an equation with the gold on the wrong side, a dropped sign, an interval
with one end's openness swapped. Every one must be WRONG; ``equal_forms`` writes the same value
differently, and every one must stay CORRECT. Tasks declare no precision (exact comparison),
except in the declared-precision test, where the ±1 unit answers must still be WRONG.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from certd.domains.math import MathTask, verify_math
from certd.domains.verdict import Status

# Golds: integers, printed decimals, fractions, radicals, constants, expressions, intervals,
# equations.
NUMBERS = ["7", "-12", "1000001", "3.14159", "-0.0625", "2.5", r"\frac{3}{7}", r"-\frac{5}{2}"]
CONSTANTS = [r"\sqrt{2}", r"2\sqrt{3}", r"\pi", r"\frac{\pi}{4}", "e^{2}", r"\ln 5"]
EXPRESSIONS = ["x^2 - 1", r"\frac{x+1}{x-1}", r"\sin x", r"e^{x}", r"2x\sqrt{x}"]
INTERVALS = ["(1, 3]", "[-2, 5)", r"[0, \infty)", r"(-\infty, 4]"]
EQUATIONS = ["x = 4", "y = 2x + 1"]

K_SMALL = [3, 6, 12, 30, 60, 200]
LATTICE = ["1", "10", "2^{64}", "10^{40}", "7!"]


def _ulp(text: str, step: int) -> str:
    """The printed number with its last digit moved by ``step`` units (carrying)."""
    digits = re.sub(r"\D", "", text)
    moved = str(int(digits) + step).rjust(len(digits), "0")
    if "." in text:
        head = text.lstrip("-")
        point = len(head) - head.index(".") - 1
        moved = moved[: len(moved) - point] + "." + moved[len(moved) - point :]
        if moved.startswith("."):
            moved = "0" + moved
    return ("-" if text.startswith("-") else "") + moved


def perturbations(gold: str) -> Iterator[tuple[str, str]]:
    """(kind, answer) pairs that are not equal to ``gold``."""
    if re.fullmatch(r"-?\d+(\.\d+)?", gold):
        yield "ulp+1", _ulp(gold, +1)
        yield "ulp-1", _ulp(gold, -1)
        yield "wrong side", f"{_ulp(gold, 1)} = {gold}"
        yield "wrong side", f"{gold} = {_ulp(gold, 1)}"
    if not gold.startswith(("(", "[")) and "=" not in gold:
        for k in K_SMALL:
            yield f"x(1+10^-{k})", rf"\left({gold}\right)\cdot\left(1+10^{{-{k}}}\right)"
            yield f"+10^-{k}", rf"{gold} + 10^{{-{k}}}"
        for k in LATTICE:
            yield f"lattice {k}", rf"{gold} + \sin({k}\pi x)"
            yield f"lattice^2 {k}", rf"{gold} + \sin^{{2}}({k}\pi x)"
        if gold.startswith("-"):
            yield "dropped sign", gold[1:]
        else:
            yield "dropped sign", f"-{gold}" if "x" not in gold else f"-({gold})"
    if gold.startswith(("(", "[")):
        left, right = gold[0], gold[-1]
        body = gold[1:-1]
        if "infty" not in body.split(",")[0]:
            yield "left swap", {"(": "[", "[": "("}[left] + body + right
        if "infty" not in body.split(",")[1]:
            yield "right swap", left + body + {")": "]", "]": ")"}[right]
        yield "both swap", {"(": "[", "[": "("}[left] + body + {")": "]", "]": ")"}[right]
    if "=" in gold:
        lhs, rhs = (s.strip() for s in gold.split("=", 1))
        yield "rhs+1", f"{lhs} = {rhs} + 1"
        yield "rhs+10^-30", f"{lhs} = {rhs} + 10^{{-30}}"
        yield "rhs lattice", rf"{lhs} = {rhs} + \sin(10\pi x)"
        yield "dropped sign", f"{lhs} = -({rhs})"


def equal_forms(gold: str) -> Iterator[str]:
    """Answers equal to ``gold``, written differently."""
    yield gold
    if gold.startswith(("(", "[")) or "=" in gold:
        yield gold.replace(",", " ,  ")
        if "=" in gold:
            lhs, rhs = (s.strip() for s in gold.split("=", 1))
            yield f"{rhs} = {lhs}"
        return
    yield rf"\frac{{2 \cdot \left({gold}\right)}}{{2}}"
    yield rf"{gold} + \sin(10\pi x) - \sin(10\pi x)"
    yield rf"\left({gold}\right)\left(\sin^2(x) + \cos^2(x)\right)"
    yield rf"{gold} + 10^{{-30}} - \frac{{1}}{{10^{{30}}}}"


CORPUS = NUMBERS + CONSTANTS + EXPRESSIONS + INTERVALS + EQUATIONS


def _status(gold: str, answer: str, digits: int | None = None) -> tuple[Status, str]:
    v = verify_math(MathTask(gold=gold, precision_digits=digits), rf"\boxed{{{answer}}}")
    return v.status, v.detail


@pytest.mark.parametrize("gold", CORPUS)
def test_every_perturbation_is_wrong(gold: str) -> None:
    cases = list(perturbations(gold))
    assert len(cases) >= 2, gold  # the generator produces something for every gold
    passed = []
    for kind, answer in cases:
        status, detail = _status(gold, answer)
        if status is Status.CORRECT:
            passed.append((kind, answer, detail))
    assert not passed, f"false positives for {gold}: {passed}"


@pytest.mark.parametrize("gold", CORPUS)
def test_equal_forms_stay_correct(gold: str) -> None:
    wrong = []
    for answer in equal_forms(gold):
        status, detail = _status(gold, answer)
        if status is not Status.CORRECT:
            wrong.append((answer, detail))
    assert not wrong, f"equal forms refused for {gold}: {wrong}"


@pytest.mark.parametrize("gold", [g for g in NUMBERS if re.fullmatch(r"-?\d+(\.\d+)?", g)])
def test_one_unit_of_the_last_digit_is_wrong_at_the_golds_precision(gold: str) -> None:
    digits = len(re.sub(r"\D", "", gold).lstrip("0")) or 1
    for step in (+1, -1):
        status, detail = _status(gold, _ulp(gold, step), digits)
        assert status is Status.WRONG_ANSWER, (gold, step, detail)
    assert _status(gold, gold, digits)[0] is Status.CORRECT


def test_the_generator_covers_every_kind() -> None:
    kinds = {kind.split(" ")[0] for gold in CORPUS for kind, _ in perturbations(gold)}
    for kind in ("ulp+1", "ulp-1", "wrong", "lattice", "dropped", "left", "right"):
        assert kind in kinds
    assert any(k.startswith("x(1+10^-") for k in kinds) and any(
        k.startswith("+10^-") for k in kinds
    )
