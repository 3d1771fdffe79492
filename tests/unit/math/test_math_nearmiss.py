"""An adversarial generator for the classes of issue #28, with fresh constants on every run.

Each round draws new constants (shifts ``e^{-N}``, offsets, integers, nested exponents) from
a seed that is printed on failure (``NEARMISS_SEED=<n>`` replays it) and writes:

- ``tiny``: an answer that differs from the gold by a term below any fixed precision
  (``\\sin(x+e^{-N})``, ``2x+\\tanh(x^2+N)``, ``\\sqrt{x^4+e^{-N}}``, ``x+e^{-e^{M}}``);
- ``integer``: one that differs only at integers or argument crossings (``\\lceil x\\rceil-1``
  against ``\\lfloor x\\rfloor``, ``+\\lfloor\\frac{1}{1+(x-c)^2}\\rfloor``);
- ``hidden``: a gold answer written where it does not render (``%`` comments, phantoms,
  ``\\iffalse``);
- ``limit``: a two-sided limit whose sides differ;
- ``overflow``: an answer whose evaluation overflows (``\\frac{1}{1+e^{-e^{M}}}``);

and equal forms of each. The class property: no near miss is CORRECT, every equal form is
CORRECT, and nothing is INFRA_ERROR. The default run checks a few hundred pairs; the ``slow``
run 2,050.
"""

from __future__ import annotations

import os
import random
import secrets

import pytest

from certd.domains.math import MathTask, verify_math
from certd.domains.verdict import Status

Pair = tuple[str, str, str]  # (class, gold, response)


def _lin(r: random.Random) -> tuple[str, int, int]:
    a, b = r.choice([1, 2, 3, 5]), r.randint(-9, 9)
    return (f"{a}x{b:+d}" if a != 1 else f"x{b:+d}"), a, b


def tiny(r: random.Random) -> list[Pair]:
    n, big, m = r.randint(200, 3000), r.randint(60, 5000), r.randint(60, 3000)
    arg, _, b = _lin(r)
    c = r.randint(1, 20)
    f = r.choice([r"\sin", r"\cos", r"\exp", r"\ln"])
    inner = f"{arg}" if f != r"\ln" else f"x^{{2}}+{c}"
    return [
        ("tiny", f"{f}({inner})", f"\\boxed{{{f}({inner}+e^{{-{n}}})}}"),
        ("tiny", f"{arg}", f"\\boxed{{{arg}-1+\\tanh(x^{{2}}+{big})}}"),
        ("tiny", f"(x{b:+d})^{{2}}", f"\\boxed{{\\sqrt{{(x{b:+d})^{{4}}+e^{{-{n}}}}}}}"),
        ("tiny", f"{arg}", f"\\boxed{{{arg}+e^{{-e^{{{m}}}}}}}"),
        ("tiny", f"{c}", f"\\boxed{{{c}+e^{{-{n}}}}}"),
        ("tiny", f"{c}x", f"\\boxed{{{c}x\\cdot\\tanh(x^{{2}}+{big})}}"),
        ("tiny", f"e^{{{arg}}}", f"\\boxed{{e^{{{arg}}}(1+e^{{-{n}}}\\sin^{{2}} x)}}"),
    ]


def tiny_equal(r: random.Random) -> list[Pair]:
    arg, _, b = _lin(r)
    c = r.randint(1, 20)
    root = f"\\sqrt{{x^{{2}}+{c}}}"
    return [
        ("tiny=", r"\sin x", r"\boxed{2\sin\left(\frac{x}{2}\right)\cos\left(\frac{x}{2}\right)}"),
        ("tiny=", f"e^{{x+{c}}}", f"\\boxed{{e^{{{c}}}e^{{x}}}}"),
        ("tiny=", f"(x{b:+d})^{{2}}", f"\\boxed{{x^{{2}}{2 * b:+d}x+{b * b}}}"),
        ("tiny=", "1", r"\boxed{\sin^{2}x+\cos^{2}x}"),
        ("tiny=", f"{arg}", f"\\boxed{{\\ln(e^{{{arg}}})}}"),
        ("tiny=", root, f"\\boxed{{\\frac{{x^{{2}}+{c}}}{{{root}}}}}"),
        ("tiny=", f"\\cos({arg})", f"\\boxed{{1-2\\sin^{{2}}\\left(\\frac{{{arg}}}{{2}}\\right)}}"),
    ]


def integer(r: random.Random) -> list[Pair]:
    k, c, m = r.randint(-50, 50), r.randint(-60, 60), r.randint(2, 9)
    arg, _, _ = _lin(r)
    bump = f"\\lfloor\\frac{{1}}{{1+(x{-c:+d})^{{2}}}}\\rfloor"  # 1 at x = c, else 0
    frac = f"\\frac{{x}}{{{m}}}"
    return [
        ("integer", f"\\lfloor x{k:+d}\\rfloor", f"\\boxed{{\\lceil x{k:+d}\\rceil-1}}"),
        ("integer", f"{arg}", f"\\boxed{{{arg}+{bump}}}"),
        ("integer", f"\\lfloor{frac}\\rfloor", f"\\boxed{{\\lceil{frac}\\rceil-1}}"),
        ("integer", f"|x{-c:+d}|", f"\\boxed{{|x{-c:+d}|+{bump}}}"),
        ("integer", "x", r"\boxed{x+\lfloor x\rfloor-\lceil x\rceil+1}"),
    ]


def integer_equal(r: random.Random) -> list[Pair]:
    k, c = r.randint(-50, 50), r.randint(-60, 60)
    return [
        ("integer=", f"\\lfloor x\\rfloor{k:+d}", f"\\boxed{{\\lfloor x{k:+d}\\rfloor}}"),
        ("integer=", f"(x{-c:+d})^{{2}}", f"\\boxed{{|x{-c:+d}|^{{2}}}}"),
        ("integer=", r"\lceil x\rceil", r"\boxed{-\lfloor -x\rfloor}"),
        ("integer=", f"{abs(k) + 1}|x|", f"\\boxed{{|{abs(k) + 1}x|}}"),
    ]


def hidden(r: random.Random) -> list[Pair]:
    g, w, n = r.randint(-999, 999), r.randint(1, 999), r.randint(0, 99)
    w = g + w
    return [
        # a percent sign under Markdown, a comment under LaTeX: read the way that hides it
        ("hidden", f"{g}", f"The answer is \\boxed{{{w}}}. {n}% \\boxed{{{g}}}"),
        ("hidden", f"{g}", f"The answer is \\boxed{{{w}}}, up {n}%\\fbox{{{g}}}"),
        ("hidden", f"{g}", f"The answer is \\boxed{{{w}}}. % \\boxed{{{g}}}"),
        ("hidden", f"{g}", f"The answer is \\boxed{{{w}}}.\\phantom{{\\boxed{{{g}}}}}"),
        ("hidden", f"{g}", f"The answer is \\boxed{{{w}}}. \\vphantom{{\\boxed{{{g}}}}}"),
        ("hidden", f"{g}", f"The answer is \\boxed{{{w}}}. \\iffalse \\boxed{{{g}}} \\fi"),
        ("hidden", f"{g}", f"So $\\boxed{{{w}}}$.\n%The final answer is {g}"),
    ]


def hidden_equal(r: random.Random) -> list[Pair]:
    g = r.randint(-999, 999)
    return [
        ("hidden=", f"{g}", f"The answer is \\boxed{{{g}}}. % checked twice"),
        ("hidden=", f"{g}", f"\\phantom{{-}}\\boxed{{{g}}}"),
        ("hidden=", f"{g}", f"\\iffalse \\boxed{{{g + 1}}} \\fi The answer is \\boxed{{{g}}}."),
        ("hidden=", f"{abs(g)}\\%", f"The answer is $\\boxed{{{abs(g)}\\%}}$."),
        ("hidden=", f"{g}", f"A {abs(g)}% rise, so the answer is \\boxed{{{g}}}."),
    ]


def limit(r: random.Random) -> list[Pair]:
    c, k = r.randint(-9, 9), r.randint(1, 9)
    sign = r.choice(["", "-"])
    lim = f"\\lim_{{x\\to {c}}}"
    return [
        ("limit", f"{sign}{k}", f"\\boxed{{{lim}\\frac{{{k}|x{-c:+d}|}}{{x{-c:+d}}}}}"),
        ("limit", f"{sign}1", f"\\boxed{{\\lim_{{x\\to {c}}}\\frac{{|x{-c:+d}|}}{{x{-c:+d}}}}}"),
    ]


def limit_equal(r: random.Random) -> list[Pair]:
    k = r.randint(1, 9)
    return [
        ("limit=", f"{k}", f"\\boxed{{\\lim_{{x\\to 0}}\\frac{{\\sin({k}x)}}{{x}}}}"),
        ("limit=", f"{k}", f"\\boxed{{\\lim_{{x\\to 0}}\\frac{{e^{{{k}x}}-1}}{{x}}}}"),
        ("limit=", "0", f"\\boxed{{\\lim_{{x\\to 0}}\\frac{{{k}|x|^{{2}}}}{{x}}}}"),
    ]


def overflow(r: random.Random) -> list[Pair]:
    m, n = r.randint(100, 100_000), r.randint(20, 400)
    return [
        ("overflow", "1", f"\\boxed{{\\frac{{1}}{{1+e^{{-e^{{{m}}}}}}}}}"),
        ("overflow", "0", f"\\boxed{{e^{{-e^{{{m}}}}}}}"),
        ("overflow", "1", f"\\boxed{{\\frac{{e^{{e^{{{n}}}}}}}{{e^{{e^{{{n}}}}}+1}}}}"),
    ]


def overflow_equal(r: random.Random) -> list[Pair]:
    m = r.randint(100, 100_000)
    return [("overflow=", f"e^{{-e^{{{m}}}}}", f"\\boxed{{e^{{-e^{{{m}}}}}}}")]


GENERATORS = [tiny, integer, hidden, limit, overflow]
EQUAL = [tiny_equal, integer_equal, hidden_equal, limit_equal, overflow_equal]


def pairs(seed: int, rounds: int) -> list[tuple[bool, Pair]]:
    """``rounds`` rounds of every class: (whether equal, (class, gold, response))."""
    r = random.Random(seed)
    out: list[tuple[bool, Pair]] = []
    for _ in range(rounds):
        out += [(False, p) for g in GENERATORS for p in g(r)]
        out += [(True, p) for g in EQUAL for p in g(r)]
    return out


def _seed() -> int:
    return int(os.environ.get("NEARMISS_SEED") or secrets.randbits(32))


def _run(rounds: int) -> None:
    seed = _seed()
    bad = []
    for equal, (cls, gold, response) in pairs(seed, rounds):
        v = verify_math(MathTask(gold=gold), response)
        ok = v.status is Status.CORRECT if equal else v.status is not Status.CORRECT
        if not ok or v.status is Status.INFRA_ERROR:
            bad.append(f"{cls}: gold {gold!r} response {response!r} -> {v.status.name} {v.detail}")
    assert not bad, f"NEARMISS_SEED={seed}: {len(bad)} failures\n" + "\n".join(bad[:20])


def test_issue_table_is_wrong() -> None:
    """Every row of issue #28's table is WRONG (and none is INFRA_ERROR)."""
    rows = [
        (r"\sin x", r"\boxed{\sin(x+e^{-1000})}"),
        ("2x+1", r"\boxed{2x+\tanh(x^{2}+1000)}"),
        ("x^2", r"\boxed{\sqrt{x^{4}+e^{-10^{4}}}}"),
        (r"\lfloor x\rfloor", r"\boxed{\lceil x\rceil-1}"),
        ("x", r"\boxed{x+\lfloor\frac{1}{1+x^{2}}\rfloor}"),
        ("3", r"The answer is \boxed{4}. % \boxed{3}"),
        ("3", r"The answer is \boxed{4}. \phantom{\boxed{3}}"),
        ("3", r"The answer is \boxed{4}. \iffalse \boxed{3} \fi"),
        ("1", r"\boxed{\lim_{x\to 0}\frac{|x|}{x}}"),
        ("1", r"\boxed{\frac{1}{1+e^{-e^{100}}}}"),
    ]
    for gold, response in rows:
        v = verify_math(MathTask(gold=gold), response)
        assert v.status in (Status.WRONG_ANSWER, Status.UNPARSED), (gold, response, v)


def test_generator_default() -> None:
    """A few hundred fresh pairs: no near miss CORRECT, every equal form CORRECT."""
    _run(rounds=5)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_generator_thousands() -> None:
    """2,050 fresh pairs (about 5 minutes on one idle core)."""
    _run(rounds=50)
