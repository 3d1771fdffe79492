"""Same solution = same computation: identity operations never make a new family (issue 30).

The renderings of one solution with ``×1``, ``÷1``, ``+0``, ``−0``, ``×(a÷a)``, ``+(a−a)`` and
their nestings share one canonical form, and so one certificate and one enumerated family; the
enumerator and the certification gate use that one form (``canonical_form``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certd.authority.checker import Checkers
from certd.authority.feasibility import Authority, CertifyRequest
from certd.config import CertdConfig, CountdownConfig, MathConfig
from certd.domains import countdown as cd
from certd.domains.countdown import BinOp, Expr, Num, evaluate, render
from certd.domains.countdown.canonical import canon_of
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.service.convert import checked_task
from certd.signing.keys import SigningKey
from forkgate._base import certify_request

KAPPA = "countdown.first-op.v1"
CFG = CertdConfig(countdown=CountdownConfig(verify_workers=0), math=MathConfig(enabled=False))

# The six renderings of 3·4+5 on [1,3,4,5] → 17, each under its own first-op label.
SIX = ["3*4*1+5", "5*1+3*4", "3/1*4+5", "5/1+3*4", "(5+3*4)/1", "1*3*4+5"]


def canon(text: str) -> str:
    return cd.canonical_form(cd.parse_expression(text))


def test_the_six_renderings_share_one_form_and_one_enumerated_family() -> None:
    assert {canon(r) for r in SIX} == {"5+3*4"}
    labels = {cd.kappa_first_op(cd.parse_expression(r)).label for r in SIX}
    assert labels == {"3,*", "5,*", "3,/", "5,/", "5,+", "1,*"}
    e = cd.enumerate_families(cd.CountdownTask(numbers=(1, 3, 4, 5), target=17))
    assert e.solutions == ("4*5-3", "5+3*4")
    names = [[e.labels[i].label for i in f] for f in e.families]
    # Two solutions, two families: labels that also start 4·5−3 (``5*4-3``, ``1*4*5-3``, …)
    # share a family with it; the labels that start only 3·4+5 are one family.
    assert names == [["1,*", "4,*", "4,/", "5,*", "5,/"], ["3,*", "3,/", "5,+"]]
    assert e.certifiable == 2


@pytest.fixture
def authority(tmp_path: Path) -> Iterator[Authority]:
    key = SigningKey.generate("forkgate.test/identities")
    ledger = Ledger(SQLiteStore(tmp_path / "ledger.db"), key, "forkgate.test/identities")
    yield Authority(Checkers(CFG), ledger, key)
    ledger.close()


def _request(numbers: list[int], target: int, witness: str) -> CertifyRequest:
    label = cd.kappa_first_op(cd.parse_expression(witness)).label
    wire = {"domain": "countdown", "task": {"numbers": numbers, "target": target}}
    pb = certify_request(wire, label, witness)
    return CertifyRequest(checked_task(pb.task, CFG, "task"), KAPPA, pb.label.value, pb.witness)


def test_the_six_renderings_get_one_certificate(authority: Authority) -> None:
    outcomes = authority.certify_batch([_request([1, 3, 4, 5], 17, w) for w in SIX])
    assert outcomes[0].certificate is not None
    assert [o.refusal.reason if o.refusal else "" for o in outcomes[1:]] == ["PSEUDO_FORK"] * 5
    other = authority.certify_batch([_request([1, 3, 4, 5], 17, "4*5*1-3")])[0]
    assert other.certificate is not None  # 4·5−3 is a different solution: a second family


def test_the_two_twos_renderings_get_one_certificate(authority: Authority) -> None:
    renderings = ["3*4+5*2/2", "2/2*3*4+5", "5+(2-2)+3*4", "5-2+2+3*4"]
    outcomes = authority.certify_batch([_request([2, 2, 3, 4, 5], 17, w) for w in renderings])
    assert outcomes[0].certificate is not None
    assert all(o.refusal and o.refusal.reason == "PSEUDO_FORK" for o in outcomes[1:]), outcomes


# --- property tests: random solutions, random identity insertions, random operand orders ---

_NUMBERS = st.lists(st.integers(2, 30), min_size=2, max_size=5, unique=True)


def _tree(rng: random.Random, numbers: list[int]) -> Expr:
    """A random tree over ``numbers`` (distinct, >= 2) with no division by zero."""
    nodes: list[Expr] = [Num(n) for n in numbers]
    rng.shuffle(nodes)
    while len(nodes) > 1:
        i = rng.randrange(len(nodes) - 1)
        a, b = nodes[i], nodes[i + 1]
        ops = "+-*/" if evaluate(b) != 0 else "+-*"
        nodes[i : i + 2] = [BinOp(rng.choice(ops), a, b)]
    return nodes[0]


def _decorate(rng: random.Random, e: Expr, pool: list[int], depth: int = 0) -> Expr:
    """``e`` re-rendered: operands of ``+``/``*`` swapped at random, identities inserted."""
    if type(e) is BinOp:
        left = _decorate(rng, e.left, pool, depth + 1)
        right = _decorate(rng, e.right, pool, depth + 1)
        if e.op in "+*" and rng.random() < 0.5:
            left, right = right, left
        e = BinOp(e.op, left, right)
    if depth > 6 or rng.random() < 0.6:
        return e
    return _identity(rng, e, pool, depth)


def _identity(rng: random.Random, e: Expr, pool: list[int], depth: int) -> Expr:
    a: Expr = Num(rng.choice(pool))
    if rng.random() < 0.3:  # a nested identity: the cancelling operand is itself decorated
        a = _decorate(rng, a, pool, depth + 2)
    kinds: list[tuple[str, Expr]] = [
        ("*", Num(1)),
        ("/", Num(1)),
        ("+", Num(0)),
        ("-", Num(0)),
        ("*", BinOp("/", a, a)),
        ("+", BinOp("-", a, a)),
    ]
    op, unit = rng.choice(kinds)
    if op in "+*" and rng.random() < 0.5:
        return BinOp(op, unit, e)
    if rng.random() < 0.3:  # (e*a)/a and (e+a)-a: the identity split across two operations
        return BinOp("/", BinOp("*", e, a), a) if op in "*/" else BinOp("-", BinOp("+", e, a), a)
    return BinOp(op, e, unit)


@settings(max_examples=300, deadline=None)
@given(numbers=_NUMBERS, seed=st.integers(0, 2**32 - 1))
def test_rerenderings_with_identities_map_to_the_first_form(numbers: list[int], seed: int) -> None:
    rng = random.Random(seed)
    solution = _tree(rng, numbers)
    first = cd.canonical_form(solution)
    for _ in range(5):
        other = _decorate(rng, solution, numbers)
        assert evaluate(other) == evaluate(solution)
        assert cd.canonical_form(cd.parse_expression(render(other))) == first, render(other)


@settings(max_examples=300, deadline=None)
@given(numbers=_NUMBERS, seed=st.integers(0, 2**32 - 1))
def test_genuinely_different_solutions_never_share_a_form(numbers: list[int], seed: int) -> None:
    # Over distinct numbers >= 2 used once a tree has no identity operation, so the structural
    # form without identity removal (canon_of) is the independent judge of "same solution".
    rng = random.Random(seed)
    a, b = _tree(rng, numbers), _tree(rng, numbers)
    different = canon_of(a).text != canon_of(b).text
    decorated = _decorate(rng, b, numbers)
    assert (cd.canonical_form(decorated) != cd.canonical_form(a)) == different
    if evaluate(a) == evaluate(b) and evaluate(a) == Fraction(int(evaluate(a))):
        assert (canon(render(decorated)) == canon(render(a))) == (not different)
