"""Per-question clusters of first steps: fit without a fixed count, assign, record, check.

Example:
    >>> params = ClusterParams(distance_threshold=0.3)
    >>> steps = ["b", "a", "c", "a"]
    >>> vecs = {"a": [1.0, 0.0], "b": [0.96, 0.28], "c": [0.0, 1.0]}
    >>> model = fit_clusters(steps, [vecs[s] for s in steps], params)
    >>> model.names, model.sizes
    (('k1', 'k2'), (3, 1))
    >>> assign(model, [0.99, 0.14]), assign(model, [-1.0, 0.0])
    ('k1', 'outside')

**The method.** Average-linkage (UPGMA) agglomerative clustering on cosine distance, stopped
when the closest pair of clusters is farther apart than ``distance_threshold``: the number of
clusters follows from the data. Identical steps are merged first, so the fit runs over the
distinct step texts with their counts as weights (the same result as clustering every
rollout: UPGMA weights each group by its size).

**Order.** The distinct steps are sorted by text before anything is computed, and every tie
(equal distances, equal sizes) is broken by that order, so the fit is a function of the
multiset of steps: re-ordering the rollouts changes nothing. Clusters are named ``k1``, ``k2``,
… by decreasing size, then by the text of their medoid (the member closest, on weighted
average, to the rest of its cluster).

**Assignment.** A step goes to the centroid (the normalised weighted mean of its members'
embeddings) with the highest cosine, rounded to 6 decimals; ties go to the earlier name. A
step whose best cosine is below ``1 - distance_threshold`` joined no cluster: its label is
``outside``. A rollout without a step is ``none``. Because a label depends only on the step's
embedding and the recorded centroids, anyone holding the centroids recomputes it; a
paraphrase lands in the same cluster as long as it stays closer to that centroid than to
any other.

**The record.** ``ClusterModel.to_json`` writes the parameters, names, sizes, medoids, the
centroids as base64 little-endian float32 and the SHA-256 of the steps fitted; ``from_json``
reads it back under the same bounds, so a certificate's record re-creates the same labels.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from certd.errors import InvalidInputError

__all__ = [
    "ClusterModel",
    "ClusterParams",
    "NO_STEP",
    "OUTSIDE",
    "assign",
    "cosines",
    "fit_clusters",
    "steps_digest",
]

NO_STEP = "none"
OUTSIDE = "outside"
_ROUND = 6  # cosines are compared after rounding to this many decimals


@dataclass(frozen=True, slots=True)
class ClusterParams:
    """How a question's steps are clustered (every field is part of the κ version).

    Attributes:
        distance_threshold: stop merging when the closest clusters' average cosine distance
            exceeds this (0 < t < 2); also the assignment radius (``1 - t`` in cosine).
        max_steps: at most this many rollouts per fit.
        max_distinct: at most this many distinct step texts per fit.
        max_clusters: a record with more clusters than this is refused.
    """

    distance_threshold: float = 0.4
    max_steps: int = 512
    max_distinct: int = 256
    max_clusters: int = 64

    def __post_init__(self) -> None:
        if not 0.0 < self.distance_threshold < 2.0:
            raise InvalidInputError(
                f"distance_threshold: expected 0 < t < 2, got {self.distance_threshold}",
                field="distance_threshold",
            )

    @property
    def tag(self) -> str:
        """The parameters as they appear in the κ version, e.g. ``upgma-cos0.2``."""
        return f"upgma-cos{self.distance_threshold:g}"


@dataclass(frozen=True, slots=True)
class ClusterModel:
    """A question's fitted clusters: what Certify needs to recompute a label."""

    params: ClusterParams
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    medoids: tuple[str, ...]
    centroids: tuple[tuple[float, ...], ...]
    steps_sha256: str

    @property
    def digest(self) -> str:
        """Hex SHA-256 of the canonical JSON record."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def to_json(self) -> str:
        """The canonical JSON record (sorted keys, no spaces)."""
        rows = [np.asarray(c, dtype="<f4").tobytes() for c in self.centroids]
        record: dict[str, Any] = {
            "method": self.params.tag,
            "names": list(self.names),
            "sizes": list(self.sizes),
            "medoids": list(self.medoids),
            "centroids_f32": [base64.b64encode(r).decode() for r in rows],
            "steps_sha256": self.steps_sha256,
        }
        return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, params: ClusterParams, *, dim: int) -> ClusterModel:
        """Read a record written by ``to_json`` for ``params`` and ``dim``-wide embeddings.

        Raises:
            InvalidInputError: malformed, another method, or over the bounds.

        Returns:
            The model.
        """
        try:
            obj = json.loads(text)
            method = obj["method"]
            names = tuple(str(n) for n in obj["names"])
            sizes = tuple(int(s) for s in obj["sizes"])
            medoids = tuple(str(m) for m in obj["medoids"])
            raw = [base64.b64decode(r, validate=True) for r in obj["centroids_f32"]]
            steps_sha = str(obj["steps_sha256"])
        except (ValueError, KeyError, TypeError) as e:
            raise InvalidInputError(f"clusters: malformed record: {e}", field="clusters") from e
        if method != params.tag:
            raise InvalidInputError(
                f"clusters: expected method {params.tag}, got {method!r}", field="clusters"
            )
        n = len(names)
        if not 0 < n <= params.max_clusters or not (n == len(sizes) == len(medoids) == len(raw)):
            raise InvalidInputError(
                f"clusters: expected 1..{params.max_clusters} clusters with one size, medoid "
                f"and centroid each, got {n}/{len(sizes)}/{len(medoids)}/{len(raw)}",
                field="clusters",
            )
        if any(len(r) != 4 * dim for r in raw):
            raise InvalidInputError(f"clusters: expected {dim}-wide centroids", field="clusters")
        centroids = tuple(
            tuple(float(x) for x in np.frombuffer(r, dtype="<f4").tolist()) for r in raw
        )
        return cls(params, names, sizes, medoids, centroids, steps_sha)


def steps_digest(steps: Sequence[str]) -> str:
    """SHA-256 of the sorted multiset of steps (one JSON array): order does not matter."""
    canon = json.dumps(sorted(steps), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode()).hexdigest()


def _unit(rows: Any) -> Any:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.sqrt((rows * rows).sum(axis=1, keepdims=True))
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def _upgma(dist: Any, weights: Any, threshold: float) -> list[list[int]]:
    """Average-linkage merges of points ``0..n-1`` until the closest pair is over threshold.

    ``dist`` is the symmetric distance matrix (rounded); ties go to the lowest (row, column)
    pair, which the caller's text order makes canonical.
    """
    n = len(weights)
    d = dist.astype(np.float64).copy()
    np.fill_diagonal(d, np.inf)
    w = weights.astype(np.float64).copy()
    members: list[list[int] | None] = [[i] for i in range(n)]
    while True:
        flat = int(np.argmin(d))
        a, b = divmod(flat, n)
        if not np.isfinite(d[a, b]) or d[a, b] > threshold:
            break
        a, b = min(a, b), max(a, b)
        merged = (w[a] * d[a] + w[b] * d[b]) / (w[a] + w[b])
        merged = np.round(merged, 12)
        d[a, :] = merged
        d[:, a] = merged
        d[a, a] = np.inf
        d[b, :] = np.inf
        d[:, b] = np.inf
        w[a] += w[b]
        kept, gone = members[a], members[b]
        assert kept is not None and gone is not None
        members[a] = sorted(kept + gone)
        members[b] = None
    return [m for m in members if m is not None]


def fit_clusters(
    steps: Sequence[str], vectors: Sequence[Sequence[float]], params: ClusterParams
) -> ClusterModel:
    """Cluster one question's first steps (see the module docstring).

    Args:
        steps: the first step of each rollout (rollouts without a step left out).
        vectors: each step's embedding, in the same order.
        params: the clustering parameters.

    Raises:
        InvalidInputError: no steps, mismatched lengths, or over ``max_steps``/``max_distinct``.

    Returns:
        The fitted model.
    """
    if not steps or len(steps) != len(vectors):
        raise InvalidInputError(
            f"steps: expected at least one step and one vector per step, got {len(steps)} "
            f"steps and {len(vectors)} vectors",
            field="steps",
        )
    if len(steps) > params.max_steps:
        raise InvalidInputError(
            f"steps: at most {params.max_steps} per fit, got {len(steps)}", field="steps"
        )
    counts = Counter(steps)
    texts = sorted(counts)
    if len(texts) > params.max_distinct:
        raise InvalidInputError(
            f"steps: at most {params.max_distinct} distinct per fit, got {len(texts)}",
            field="steps",
        )
    first = {s: i for i, s in reversed(list(enumerate(steps)))}
    x = _unit(np.asarray([vectors[first[t]] for t in texts], dtype=np.float64))
    weights = np.asarray([counts[t] for t in texts], dtype=np.float64)
    dist = np.round(1.0 - x @ x.T, _ROUND)
    groups = _upgma(dist, weights, params.distance_threshold)
    found = []
    for g in groups:
        wg = weights[g]
        sims = x[g] @ x[g].T
        spread = (sims * wg[None, :]).sum(axis=1)
        medoid = texts[g[int(np.argmax(np.round(spread, _ROUND)))]]
        centroid = _unit((x[g] * wg[:, None]).sum(axis=0, keepdims=True))[0]
        found.append((-int(wg.sum()), medoid, centroid))
    found.sort(key=lambda f: (f[0], f[1]))
    centroids = tuple(
        tuple(float(v) for v in np.asarray(c, dtype="<f4").tolist()) for _, _, c in found
    )
    return ClusterModel(
        params=params,
        names=tuple(f"k{i + 1}" for i in range(len(found))),
        sizes=tuple(-s for s, _, _ in found),
        medoids=tuple(m for _, m, _ in found),
        centroids=centroids,
        steps_sha256=steps_digest(steps),
    )


def cosines(model: ClusterModel, vector: Sequence[float]) -> list[float]:
    """Rounded cosine of ``vector`` to each centroid (all 0 for a zero vector)."""
    v = np.asarray(vector, dtype=np.float64)
    norm = float(np.sqrt(v @ v))
    if norm == 0.0:
        return [0.0] * len(model.names)
    c = _unit(np.asarray(model.centroids, dtype=np.float64))
    return [round(float(s), _ROUND) for s in (c @ v) / norm]


def assign(model: ClusterModel, vector: Sequence[float] | None) -> str:
    """The label of a step's embedding under ``model`` (``none`` for no step).

    Returns:
        A cluster name, ``outside`` when no centroid is within ``1 - distance_threshold``
        in cosine, or ``none``.
    """
    if vector is None:
        return NO_STEP
    sims = cosines(model, vector)
    best = max(range(len(sims)), key=lambda i: (sims[i], -i))
    if sims[best] < round(1.0 - model.params.distance_threshold, _ROUND):
        return OUTSIDE
    return model.names[best]
