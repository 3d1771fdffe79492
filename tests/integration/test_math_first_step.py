"""κ math.first-step.v1 with the real packaged embedding model (loaded offline)."""

from __future__ import annotations

import hashlib
import random

import pytest

from certd.authority.embedder import StepEmbedder, model_dir
from certd.domains.math.first_step import nearest_move


@pytest.fixture(scope="module")
def embedder() -> StepEmbedder:
    return StepEmbedder.load()


def test_model_loads_from_the_package_and_its_hash_is_in_the_kappa(
    embedder: StepEmbedder,
) -> None:
    weights = (model_dir() / "model.safetensors").read_bytes()
    digest = hashlib.sha256(weights).hexdigest()
    assert embedder.model_sha256 == digest
    assert embedder.kappa.startswith(f"math.first-step.v1+minilm.{digest[:12]}.")


def test_rewordings_of_one_step_share_a_cluster(embedder: StepEmbedder) -> None:
    steps = [
        "We substitute u = x^2, so the equation becomes u^2 - 5u + 4 = 0.",
        "Let u = x^2; then the equation is quadratic in u.",
        "Factor the quadratic: (x - 2)(x - 3) = 0.",
        "First, let me factor the quadratic: x^2 - 5x + 6 = (x-2)(x-3).",
        "By the Pythagorean theorem, the hypotenuse is 5.",
        "There are 5 choose 2 = 10 ways to pick the pair.",
        None,
    ]
    moves = embedder.moves(steps)
    assert moves[0] == moves[1] == "substitute"
    assert moves[2] == moves[3] == "factor"
    assert moves[4] == "pythagorean" and moves[5] == "counting" and moves[6] == "none"


def test_clustering_is_deterministic(embedder: StepEmbedder) -> None:
    steps = ["Take the derivative and set it to zero.", "Work modulo 9 with remainders."] * 3
    assert embedder.moves(steps) == embedder.moves(list(reversed(steps)))[::-1]


def test_screened_nearest_move_is_the_exhaustive_one(embedder: StepEmbedder) -> None:
    steps = [
        "We substitute u = x^2, so the equation becomes u^2 - 5u + 4 = 0.",
        "Consider the cases n even and n odd.",
        "The area is one half base times height, 6.",
        "Let z = a + bi with a, b real.",
        "x",
    ]
    vectors = embedder._encode(steps) + [v for _, v in embedder._prototypes]  # exact ties too
    rng = random.Random(7)
    vectors += [[x + rng.gauss(0, 0.02) for x in v] for v in vectors]
    vectors.append([0.0] * len(vectors[0]))
    for v in vectors:
        assert embedder._nearest(v) == nearest_move(v, embedder._prototypes)
