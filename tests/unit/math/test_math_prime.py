"""Grammar priming (``prime_corpus`` / ``prime_grammar``): warming only, never a different parse."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from certd.domains.math.errors import MathError
from certd.domains.math.extract import extract_answer
from certd.domains.math.limits import MathLimits
from certd.domains.math.parse import _parse, normalized, prime_grammar
from certd.domains.math.warmup import WARM_ANSWERS, WARM_PAIRS, prime_corpus, warm_up

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "conformance"))

ANSWERS = [
    r"\frac{\sqrt{3}}{2}",
    r"(-\infty, -1] \cup [2, \infty)",
    r"F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}",
    r"\begin{pmatrix}\frac{1}{3}\\ 0.2\end{pmatrix}",
    r"y = -\frac{1}{2}x + \frac{3}{4}",
    r"1 \leq |z| \leq \frac{3}{2}",
    r"x_{1}=10^{\frac{-5+\sqrt{13}}{6}}",
    r"\tan^2(y) + 1",
    r"a_3 = 2, a_{37} = 19",
    r"3 + 4i",
]


def test_the_corpus_is_fixed_and_generated_from_the_tables() -> None:
    corpus = prime_corpus()
    assert corpus == prime_corpus()
    assert len(corpus) > 1000
    assert not set(corpus) & set(WARM_ANSWERS)


def test_the_corpus_shares_no_answer_with_the_benchmark_cases() -> None:
    mathverify_cases = pytest.importorskip("mathverify_cases")
    try:
        cases = mathverify_cases.load_cases()
    except RuntimeError as e:  # no sdist and no network
        pytest.skip(str(e))
    seen = {c.gold for c in cases} | {c.pred for c in cases}
    assert not set(prime_corpus()) & seen


def test_the_warm_up_pairs_share_no_answer_with_the_benchmark_cases() -> None:
    mathverify_cases = pytest.importorskip("mathverify_cases")
    try:
        cases = mathverify_cases.load_cases()
    except RuntimeError as e:  # no sdist and no network
        pytest.skip(str(e))

    def answers(texts: set[str]) -> set[str]:
        out = set()
        for t in texts:
            try:
                out.add(normalized(extract_answer(t).text)[0])
            except MathError:
                pass
        return out

    warm = {t for pair in WARM_PAIRS for t in pair}
    cases_seen = answers({c.gold for c in cases} | {c.pred for c in cases})
    assert len(answers(warm)) >= len(WARM_PAIRS)
    assert not answers(warm) & cases_seen


def test_warming_up_checks_every_pair_without_raising() -> None:
    assert warm_up() == len(WARM_ANSWERS)  # every representative answer parses


def test_prime_grammar_accepts_answers_and_refuses_junk_without_raising() -> None:
    assert prime_grammar(r"\frac{1}{2} + x")
    assert not prime_grammar(r"\frac{1}{")
    assert not prime_grammar("")
    assert not prime_grammar("{" * 10_000)  # over the caps: skipped, not parsed


@pytest.mark.slow
def test_priming_the_whole_corpus_changes_no_parse() -> None:
    lim = MathLimits()
    before = [(str(_parse(a, lim, n).value), n) for a in ANSWERS for n in (True, False)]
    accepted = sum(prime_grammar(t, numbers=n) for t in prime_corpus() for n in (True, False))
    assert accepted > len(prime_corpus())  # most of the corpus is grammatical
    after = [(str(_parse(a, lim, n).value), n) for a in ANSWERS for n in (True, False)]
    assert after == before
