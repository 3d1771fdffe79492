"""The learned κ with the real packaged embedding model: re-ordering, paraphrase, recompute."""

from __future__ import annotations

import random

import pytest

from certd.kappa import ClusterModel, ClusterParams, LearnedKappa, adjusted_rand_index
from certd.kappa.learned import EMBED_DIM

# One question (x^2 + 5x + 6 = 0), rollouts opening three different ways.
ROLLOUTS = {
    "formula": [
        "Apply the quadratic formula: x = (-5 ± sqrt(25 - 24))/2.",
        "By the quadratic formula, x = (-5 ± √(25 − 24)) / 2.",
        "Using the quadratic formula with a = 1, b = 5, c = 6: x = (-5 ± 1)/2.",
    ],
    "factor": [
        "Factor the left side: x^2 + 5x + 6 = (x + 2)(x + 3) = 0.",
        "We factor it as (x + 2)(x + 3) = 0.",
        "Factoring: two numbers with product 6 and sum 5 are 2 and 3, so (x+2)(x+3) = 0.",
    ],
    "square": [
        "Complete the square: (x + 5/2)^2 = 25/4 - 6.",
        "Completing the square gives (x + 2.5)^2 = 0.25.",
        "We rewrite x^2 + 5x as (x + 5/2)^2 - 25/4 by completing the square.",
    ],
}
# Rewordings not seen by the fit, with the route each should land in.
PARAPHRASES = {
    "formula": [
        "Let's use the quadratic formula: x = (-5 ± sqrt(5^2 - 4·6)) / 2.",
        "The quadratic formula gives x = (−5 ± √1)/2.",
    ],
    "factor": [
        "Factoring the quadratic: x^2 + 5x + 6 = (x + 3)(x + 2).",
        "It factors as (x + 3)(x + 2) = 0.",
    ],
    "square": [
        "By completing the square, (x + 5/2)^2 = 1/4.",
        "Completing the square: x^2 + 5x + 25/4 = 1/4.",
    ],
}
THRESHOLD = 0.4  # the math corpus's paraphrases need a coarser cut than the default


@pytest.fixture(scope="module")
def kappa() -> LearnedKappa:
    return LearnedKappa.load("math", ClusterParams(distance_threshold=THRESHOLD))


def _rollouts(seed: int) -> tuple[list[str], list[str]]:
    """Each step written 1-3 times, shuffled: (responses, their routes)."""
    rng = random.Random(seed)
    rows = [(route, s) for route, steps in ROLLOUTS.items() for s in steps]
    rows = [r for r in rows for _ in range(rng.randint(1, 3))]
    rng.shuffle(rows)
    return [f"Let's think step by step. {s} Then \\boxed{{-2}}." for _, s in rows], [
        r for r, _ in rows
    ]


def test_name_carries_model_hash_and_parameters(kappa: LearnedKappa) -> None:
    assert kappa.name.startswith("math.learned.v1+minilm.")
    sha = kappa.embedder.model_sha256
    assert kappa.name == f"math.learned.v1+minilm.{sha[:12]}.t64.upgma-cos0.4"


def test_clusters_follow_routes_and_reordering_changes_nothing(kappa: LearnedKappa) -> None:
    responses, routes = _rollouts(0)
    model = kappa.fit(responses)
    labels = kappa.labels(model, responses)
    assert adjusted_rand_index(routes, labels) == 1.0
    for seed in (1, 2, 3):
        order = list(range(len(responses)))
        random.Random(seed).shuffle(order)
        again = kappa.fit([responses[i] for i in order])
        assert again.to_json() == model.to_json()  # same centroids, names, record


def test_paraphrases_get_their_routes_label(kappa: LearnedKappa) -> None:
    responses, routes = _rollouts(0)
    model = kappa.fit(responses)
    label_of = dict(zip(routes, kappa.labels(model, responses), strict=True))
    for route, texts in PARAPHRASES.items():
        got = kappa.label_steps(model, texts)
        assert got == [label_of[route]] * len(texts), (route, texts, got)


def test_a_witness_alone_recomputes_its_label_from_the_record(kappa: LearnedKappa) -> None:
    responses, _ = _rollouts(4)
    model = kappa.fit(responses)
    record = ClusterModel.from_json(model.to_json(), kappa.params, dim=EMBED_DIM)
    batch = kappa.labels(model, responses)
    alone = [kappa.labels(record, [r])[0] for r in responses[:6]]
    assert alone == batch[:6]


def test_a_step_of_another_kind_is_outside(kappa: LearnedKappa) -> None:
    responses, _ = _rollouts(0)
    model = kappa.fit(responses)
    other = "There are 5 choose 2 = 10 ways to pick the committee."
    assert kappa.label_steps(model, [other, None]) == ["outside", "none"]
