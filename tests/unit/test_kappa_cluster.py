"""certd.kappa (pure parts): per-question clustering, its record, agreement figures, steps."""

from __future__ import annotations

import base64
import json
import random

import numpy as np
import pytest

from certd.errors import InvalidInputError, UnsupportedError
from certd.kappa import (
    NO_STEP,
    OUTSIDE,
    ClusterModel,
    ClusterParams,
    adjusted_rand_index,
    assign,
    fit_clusters,
    purity,
)
from certd.kappa.math_corpus import ROUTES, math_corpus
from certd.kappa.steps import countdown_first_step, first_step

DIM = 8


def _blobs(seed: int) -> tuple[list[str], dict[str, list[float]], dict[str, int]]:
    """Three well-separated groups of unit vectors, each with several distinct 'steps'."""
    rng = np.random.default_rng(seed)
    centres = np.eye(DIM)[:3]
    steps, vecs, truth = [], {}, {}
    for g, c in enumerate(centres):
        for i in range(5):
            v = c + 0.05 * rng.standard_normal(DIM)
            name = f"g{g}-s{i}"
            vecs[name] = list(v / np.linalg.norm(v))
            truth[name] = g
            steps += [name] * (1 + i % 3)  # repeats: the same step written by several rollouts
    return steps, vecs, truth


def test_fit_finds_the_groups_without_a_cluster_count() -> None:
    steps, vecs, truth = _blobs(0)
    model = fit_clusters(steps, [vecs[s] for s in steps], ClusterParams(distance_threshold=0.3))
    assert len(model.names) == 3
    labels = [assign(model, vecs[s]) for s in steps]
    assert adjusted_rand_index([truth[s] for s in steps], labels) == 1.0
    assert sum(model.sizes) == len(steps)
    assert model.names == ("k1", "k2", "k3")


def test_fit_is_a_function_of_the_multiset_not_the_order() -> None:
    steps, vecs, _ = _blobs(1)
    params = ClusterParams(distance_threshold=0.3)
    base = fit_clusters(steps, [vecs[s] for s in steps], params)
    rng = random.Random(0)
    for _ in range(20):
        shuffled = steps[:]
        rng.shuffle(shuffled)
        again = fit_clusters(shuffled, [vecs[s] for s in shuffled], params)
        assert again.to_json() == base.to_json()
        assert again.digest == base.digest


def test_size_ties_are_named_by_medoid_text_not_by_input_order() -> None:
    vecs = {"a": [1.0, 0.0], "b": [0.0, 1.0]}
    params = ClusterParams(distance_threshold=0.1)
    one = fit_clusters(["b", "a"], [vecs["b"], vecs["a"]], params)
    two = fit_clusters(["a", "b"], [vecs["a"], vecs["b"]], params)
    assert one.medoids == two.medoids == ("a", "b")
    assert assign(one, [1.0, 0.0]) == assign(two, [1.0, 0.0]) == "k1"


def test_duplicates_weigh_like_rollouts() -> None:
    # 'a' written 5 times pulls the merged centroid toward itself.
    vecs = {"a": [1.0, 0.0], "b": [0.8, 0.6]}
    params = ClusterParams(distance_threshold=0.5)
    model = fit_clusters(["a"] * 5 + ["b"], [vecs["a"]] * 5 + [vecs["b"]], params)
    centroid = np.asarray(model.centroids[0])
    assert centroid @ np.asarray(vecs["a"]) > centroid @ np.asarray(vecs["b"])
    assert model.sizes == (6,) and model.medoids == ("a",)


def test_assign_outside_none_and_ties() -> None:
    vecs = {"a": [1.0, 0.0, 0.0], "b": [0.0, 1.0, 0.0]}
    model = fit_clusters(["a", "b"], [vecs["a"], vecs["b"]], ClusterParams(0.2))
    assert assign(model, None) == NO_STEP
    assert assign(model, [0.0, 0.0, 1.0]) == OUTSIDE  # far from both centroids
    assert assign(model, [0.0, 0.0, 0.0]) == OUTSIDE  # a zero vector joins nothing
    assert assign(model, [1.0, 1.0, 0.0]) == OUTSIDE  # cos 0.707 < 0.8
    tie = fit_clusters(["a", "b"], [vecs["a"], vecs["b"]], ClusterParams(0.4))
    assert assign(tie, [1.0, 1.0, 0.0]) == "k1"  # tie -> the earlier name


def test_record_round_trip_gives_the_same_labels() -> None:
    steps, vecs, _ = _blobs(2)
    params = ClusterParams(distance_threshold=0.3)
    model = fit_clusters(steps, [vecs[s] for s in steps], params)
    back = ClusterModel.from_json(model.to_json(), params, dim=DIM)
    assert back == model
    probe = np.random.default_rng(3).standard_normal((50, DIM))
    assert [assign(back, list(p)) for p in probe] == [assign(model, list(p)) for p in probe]


def _record(model: ClusterModel, **change: object) -> str:
    obj = json.loads(model.to_json())
    obj.update(change)
    return json.dumps(obj)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda m: "not json",
        lambda m: _record(m, method="upgma-cos0.9"),  # another κ's parameters
        lambda m: _record(m, names=[]),
        lambda m: _record(m, sizes=[1]),  # counts disagree
        lambda m: _record(m, centroids_f32=["!!!"] * len(m.names)),  # not base64
        lambda m: _record(  # the wrong width
            m, centroids_f32=[base64.b64encode(b"\0" * 12).decode()] * len(m.names)
        ),
        lambda m: _record(m, names=[f"k{i}" for i in range(100)]),  # over max_clusters
    ],
)
def test_hostile_records_are_refused(mutate: object) -> None:
    steps, vecs, _ = _blobs(4)
    params = ClusterParams(distance_threshold=0.3, max_clusters=64)
    model = fit_clusters(steps, [vecs[s] for s in steps], params)
    with pytest.raises(InvalidInputError):
        ClusterModel.from_json(mutate(model), params, dim=DIM)  # type: ignore[operator]


def test_fit_bounds() -> None:
    with pytest.raises(InvalidInputError):
        fit_clusters([], [], ClusterParams())
    with pytest.raises(InvalidInputError):
        fit_clusters(["a", "b"], [[1.0, 0.0]], ClusterParams())
    with pytest.raises(InvalidInputError):
        fit_clusters(["a"] * 5, [[1.0, 0.0]] * 5, ClusterParams(max_steps=4))
    with pytest.raises(InvalidInputError):
        fit_clusters(list("abc"), [[1.0, 0.0]] * 3, ClusterParams(max_distinct=2))
    with pytest.raises(InvalidInputError):
        ClusterParams(distance_threshold=0.0)
    assert ClusterParams(distance_threshold=0.25).tag == "upgma-cos0.25"


def test_ari_matches_sklearn_and_purity() -> None:
    # imported here: scikit-learn (with SciPy and pandas) costs ~1.3 CPU-s to collect
    from sklearn.metrics import adjusted_rand_score

    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(2, 40)
        g = [rng.randint(0, 3) for _ in range(n)]
        p = [rng.randint(0, 5) for _ in range(n)]
        assert adjusted_rand_index(g, p) == pytest.approx(adjusted_rand_score(g, p), abs=1e-12)
    assert adjusted_rand_index(["a"] * 4, ["x"] * 4) == 1.0
    assert purity(["k1", "k1", "k2"], ["a", "b", "b"]) == pytest.approx(2 / 3)
    assert purity(["k1", "k2", "k3"], ["a", "a", "a"]) == 1.0  # finer is pure: count classes
    with pytest.raises(ValueError):
        adjusted_rand_index([1], [1, 2])


@pytest.mark.parametrize(
    ("text", "step"),
    [
        ("<think>25-5=20, 20*4=80</think><answer>(25-5)*4</answer>", "25-5=20"),
        ("<think> 12 * 6 = 72\n72/12=6</think>", "12 * 6 = 72"),
        ("<think>hmm, 3+4=7</think>", None),  # the first step writes no operation
        ("<answer>3+4</answer>", None),
        ("<think>" + "9" * 50_000, None),
    ],
)
def test_countdown_first_step(text: str, step: str | None) -> None:
    assert countdown_first_step(text) == step


def test_first_step_domains() -> None:
    assert first_step("math", "Let's think. Factor: (x-2)(x-3) = 0.") == "Factor: (x-2)(x-3) = 0."
    with pytest.raises(UnsupportedError):
        first_step("code", "def f(): pass")


def test_math_corpus_is_seeded_and_routes_are_known() -> None:
    a = math_corpus(problems_per_family=2, solutions=12, seed=5)
    b = math_corpus(problems_per_family=2, solutions=12, seed=5)
    assert a == b and len(a) == 3 * 2 * 12
    assert all(r.route in ROUTES[r.family] for r in a)
    assert all("\\boxed{" in r.response for r in a)
    direct = [r for r in a if r.route == "direct"]
    assert direct and all(r.response.startswith("The answer is") for r in direct)
    assert math_corpus(problems_per_family=2, solutions=12, seed=6) != a
