"""κ math.first-step.v1 with the real packaged embedding model (loaded offline)."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest

from certd.domains.math.first_step import MOVES, nearest_move
from certd.kappa.embedder import SCREEN_MARGIN, StepEmbedder, bf16_native, model_dir


@pytest.fixture(scope="module")
def embedder() -> StepEmbedder:
    return StepEmbedder.load(screen="off")  # float32 only: the labels' definition


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


# Sentences in the style of first steps: the cases below are compared float32 vs the screen.
_STEPS = [
    *(ex for _, examples in MOVES for ex in examples),
    "We substitute u = x^2, so the equation becomes u^2 - 5u + 4 = 0.",
    "Let u = x^2; then the equation is quadratic in u.",
    "Factor the quadratic: (x - 2)(x - 3) = 0.",
    "By the Pythagorean theorem, the hypotenuse is 5.",
    "There are 5 choose 2 = 10 ways to pick the pair.",
    "Consider the cases n even and n odd.",
    "The area is one half base times height, 6.",
    "Let z = a + bi with a, b real.",
    "First compute 17 * 23 = 391, then add 9 to get 400.",
    "Taking logarithms base 2 of both sides, n = log_2 1024 = 10.",
    "Since the triangle is isosceles, the base angles are equal: 2x + 40 = 180.",
    "The derivative f'(x) = 2x - 4 vanishes at x = 2.",
    "Reducing modulo 9, the digit sum 2 + 0 + 2 + 6 = 10 leaves remainder 1.",
    "Place A at the origin and B = (6, 0) so that C lies on the y-axis.",
    "The expected value is the sum of each outcome times its probability.",
    "Write 360 = 2^3 \\cdot 3^2 \\cdot 5 and count divisors: 4 \\cdot 3 \\cdot 2 = 24.",
    "If we let the width be w then the length is 2w and 2(w + 2w) = 36.",
    "Note that a_{n+1} - a_n = 3, so the sequence is arithmetic.",
    "Multiply both sides by 12 to clear the denominators.",
    "Using the law of cosines with C = 60 degrees, c^2 = 49 + 64 - 56.",
]


def test_bf16_screen_gives_the_float32_labels(embedder: StepEmbedder) -> None:
    # Runs on any CPU: without native bfloat16 oneDNN emulates it (slower, the same rounding),
    # which is why ``auto`` leaves the screen off there (``bf16_native``).
    screened = StepEmbedder(embedder._model, embedder.model_sha256, screen=True)
    assert screened.screen and not embedder.screen
    assert screened.moves(_STEPS) == embedder.moves(_STEPS)
    distinct = len(set(_STEPS))
    assert screened.screened + screened.exact == distinct
    assert screened.screened > 0  # the exemplars themselves lead by far more than the margin
    # Every step the screen decided leads its runner-up in float32 by well over the margin's
    # half (the worst bfloat16 cosine error the margin allows).
    exact = embedder._encode(_STEPS)
    for v32, v16 in zip(exact, screened._encode(_STEPS, bf16=True), strict=True):
        per_move = np.sort(embedder.move_cosines(v32))
        if screened._screened(v16) is not None:
            assert per_move[-1] - per_move[-2] > SCREEN_MARGIN / 2


def test_spare_threads_give_the_same_labels(embedder: StepEmbedder) -> None:
    one = StepEmbedder(embedder._model, embedder.model_sha256, threads=1)
    spare = StepEmbedder(embedder._model, embedder.model_sha256, threads=1)
    assert one.moves(_STEPS) == spare.moves(_STEPS, spare=lambda: True)
    assert spare._threads_now == spare.spare_threads  # the batches did run on the spare CPUs
    fresh = ["Halve both sides of 4x = 10.", "Square both sides: x + 1 = 9."]  # not cached
    assert one.moves(fresh, spare=lambda: False) == spare.moves(fresh)
    assert spare._threads_now == spare.threads == 1


def test_load_reads_the_screen_setting(embedder: StepEmbedder) -> None:
    assert embedder.screen is False  # the fixture loads with screen="off"
    assert StepEmbedder.load(screen="auto").screen is bf16_native()
