"""A generated math corpus whose solution routes are known (for judging the math κs).

Example:
    >>> rows = math_corpus(problems_per_family=1, solutions=4, seed=0)
    >>> sorted({r.family for r in rows})
    ['quadratic', 'series', 'system']
    >>> rows[0].route in ROUTES[rows[0].family]
    True

Three problem families where the solution routes really differ:

* ``quadratic`` — the larger root of x² + bx + c = 0 (integer roots): by the quadratic
  formula, by factoring, by completing the square;
* ``system`` — x + y for two linear equations in x, y: by substitution, by elimination, by
  Cramer's rule;
* ``series`` — the sum of an arithmetic progression: by the closed formula, by pairing first
  and last terms (Gauss), by adding the terms one by one;

and, in every family, a ``direct`` route: a bare answer without working.

Each worked solution is written from a few hand-written phrasings per step (chosen at random,
so one route reads several ways), optionally after a preamble ("Let's think step by step.").
**Success is planted, and said so:** a solution's final answer is wrong (off by one, or the
other root) with the probability ``SLIP`` gives its route, so the routes differ in downstream
success by construction; whether a κ *recovers* that difference is what its determinacy
measures here. The answers are checked by the real verifier, not by the generator's flag.
Everything is seeded; the same arguments give the same corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = [
    "CorpusRow",
    "ROUTES",
    "SLIP",
    "math_corpus",
]

ROUTES: dict[str, tuple[str, ...]] = {
    "quadratic": ("formula", "factoring", "complete-square", "direct"),
    "system": ("substitution", "elimination", "cramer", "direct"),
    "series": ("closed-form", "pairing", "term-by-term", "direct"),
}
# Probability that a route's final answer is wrong (planted; see the module docstring).
SLIP: dict[str, float] = {
    "formula": 0.1,
    "factoring": 0.3,
    "complete-square": 0.5,
    "substitution": 0.15,
    "elimination": 0.3,
    "cramer": 0.5,
    "closed-form": 0.1,
    "pairing": 0.3,
    "term-by-term": 0.5,
    "direct": 0.8,
}
_PREAMBLES = ("", "Let's think step by step. ", "Okay, so I need to solve this problem. ")


@dataclass(frozen=True, slots=True)
class CorpusRow:
    """One worked solution: its problem, route, text and the gold answer."""

    problem: str
    family: str
    route: str
    question: str
    response: str
    gold: str


def _plus(v: float) -> str:
    """``+ v`` or ``- |v|`` for writing a signed term after another."""
    return f"+ {v:g}" if v >= 0 else f"- {-v:g}"


def _quadratic(rng: random.Random, route: str, r1: int, r2: int) -> tuple[str, str]:
    """(question, worked solution without the answer) for x² + bx + c with roots r1 > r2."""
    b, c = -(r1 + r2), r1 * r2
    eq = f"x^2 {'+' if b >= 0 else '-'} {abs(b)}x {'+' if c >= 0 else '-'} {abs(c)} = 0"
    q = f"Find the larger root of {eq}."
    disc = b * b - 4 * c
    steps = {
        "formula": [
            f"Apply the quadratic formula: x = ({-b} ± sqrt({disc})) / 2.",
            f"By the quadratic formula, x = ({-b} ± √(({b})^2 - 4·({c})))/2.",
            f"Using x = (-b ± sqrt(b^2 - 4ac))/(2a) with a = 1, b = {b}, c = {c}.",
        ],
        "factoring": [
            f"Factor the left side: {eq} becomes (x - {r1})(x - {r2}) = 0.",
            f"We factor it as (x - {r1})(x - {r2}) = 0.",
            f"Factoring, we look for two numbers with product {c} and sum {-b}: {r1} and {r2}.",
        ],
        "complete-square": [
            f"Complete the square: (x {_plus(b / 2)})^2 = {b * b}/4 {_plus(-c)}.",
            f"Completing the square gives (x {_plus(b / 2)})^2 = {disc / 4:g}.",
            f"We rewrite x^2 {_plus(b)}x as (x {_plus(b / 2)})^2 - {b * b / 4:g} by completing "
            "the square.",
        ],
    }
    if route == "direct":
        return q, ""
    tail = f" So the roots are {r1} and {r2}."
    return q, rng.choice(steps[route]) + tail


def _system(rng: random.Random, route: str, x: int, y: int) -> tuple[str, str]:
    a1, b1, a2, b2 = rng.choice(((1, 2, 3, -1), (2, 1, 1, -3), (1, -1, 2, 3), (3, 2, 1, 1)))
    c1, c2 = a1 * x + b1 * y, a2 * x + b2 * y
    e1, e2 = f"{a1}x + {b1}y = {c1}", f"{a2}x + {b2}y = {c2}"
    q = f"Solve {e1} and {e2}; find x + y."
    det = a1 * b2 - a2 * b1
    steps = {
        "substitution": [
            f"From the first equation, {a1}x = {c1} {_plus(-b1)}y; substitute x into the second.",
            f"Solve the first equation for x and substitute it into {e2}.",
            f"Substituting x = ({c1} {_plus(-b1)}y)/{a1} into the second equation leaves y alone.",
        ],
        "elimination": [
            f"Multiply the first equation by {a2} and the second by {a1}, then subtract to "
            "eliminate x.",
            "Eliminate x: subtract a multiple of the first equation from the second.",
            f"Adding {a2} times the first equation to -{a1} times the second cancels x.",
        ],
        "cramer": [
            f"By Cramer's rule, the determinant is {a1}·{b2} - {a2}·{b1} = {det}.",
            f"The coefficient matrix has determinant {det}, so x = D_x / {det} by Cramer's rule.",
            f"Using Cramer's rule with D = {det}, D_x = {c1 * b2 - c2 * b1}.",
        ],
    }
    if route == "direct":
        return q, ""
    return q, rng.choice(steps[route]) + f" This gives x = {x} and y = {y}."


def _series(rng: random.Random, route: str, a: int, d: int, n: int) -> tuple[str, str]:
    last = a + (n - 1) * d
    q = f"Find the sum {a} + {a + d} + {a + 2 * d} + ... + {last}."
    steps = {
        "closed-form": [
            f"The sum of an arithmetic series is n(a_1 + a_n)/2 with n = {n}.",
            f"Use S = n/2 · (first + last) = {n}/2 · ({a} + {last}).",
            f"By the arithmetic series formula, S = {n}({a} + {last})/2.",
        ],
        "pairing": [
            f"Pair the first and last terms: {a} + {last} = {a + last}, and so on.",
            f"Write the sum forwards and backwards; each column adds to {a + last}.",
            f"Pairing terms from both ends, every pair sums to {a + last}.",
        ],
        "term-by-term": [
            f"Add the terms one at a time: {a} + {a + d} = {2 * a + d}.",
            f"Start adding: {a} + {a + d} = {2 * a + d}, then + {a + 2 * d}.",
            f"Running total: {a}, {2 * a + d}, {3 * a + 3 * d}, and so on.",
        ],
    }
    if route == "direct":
        return q, ""
    return q, rng.choice(steps[route])


def _problem(rng: random.Random, family: str) -> tuple[dict[str, int], int]:
    """Parameters of a fresh problem and its answer."""
    if family == "quadratic":
        r1, r2 = sorted(rng.sample(range(-9, 10), 2), reverse=True)
        return {"r1": r1, "r2": r2}, r1
    if family == "system":
        x, y = rng.randint(-6, 9), rng.randint(-6, 9)
        return {"x": x, "y": y}, x + y
    a, d, n = rng.randint(1, 9), rng.randint(1, 5), rng.randint(6, 15)
    return {"a": a, "d": d, "n": n}, n * (2 * a + (n - 1) * d) // 2


def _write(rng: random.Random, family: str, route: str, p: dict[str, int]) -> tuple[str, str]:
    if family == "quadratic":
        return _quadratic(rng, route, p["r1"], p["r2"])
    if family == "system":
        return _system(rng, route, p["x"], p["y"])
    return _series(rng, route, p["a"], p["d"], p["n"])


def math_corpus(*, problems_per_family: int, solutions: int, seed: int) -> list[CorpusRow]:
    """``solutions`` worked solutions for each of ``problems_per_family`` problems per family.

    Routes are drawn uniformly per solution; the answer is wrong with probability ``SLIP``.

    Returns:
        The rows, problem by problem.
    """
    rng = random.Random(seed)
    rows: list[CorpusRow] = []
    for family in ROUTES:
        for i in range(problems_per_family):
            params, answer = _problem(rng, family)
            name = f"{family}-{i}"
            for _ in range(solutions):
                route = rng.choice(ROUTES[family])
                question, work = _write(rng, family, route, params)
                given = answer
                if rng.random() < SLIP[route]:
                    given = params["r2"] if family == "quadratic" else answer + rng.choice((-1, 1))
                body = f"{rng.choice(_PREAMBLES)}{work} " if work else ""
                rows.append(
                    CorpusRow(
                        name,
                        family,
                        route,
                        question,
                        f"{body}The answer is $\\boxed{{{given}}}$.".strip(),
                        str(answer),
                    )
                )
    return rows
