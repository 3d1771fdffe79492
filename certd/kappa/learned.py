"""The learned κ: per-question clusters of embedded first steps (``<domain>.learned.v1``).

Example::

    kappa = LearnedKappa.load("math", ClusterParams(distance_threshold=0.2))
    kappa.name        # 'math.learned.v1+minilm.53aa51172d14.t64.upgma-cos0.2'
    model = kappa.fit(responses)              # one question's rollouts
    kappa.labels(model, responses)            # ['k1', 'k2', 'k1', 'none', ...]

Each rollout's first step (``certd.kappa.steps``) is embedded with the packaged
all-MiniLM-L6-v2 model (``certd.kappa.embedder.StepEmbedder``, the model that
``math.first-step.v1`` uses) and the question's steps are clustered with
``certd.kappa.clustering`` (average linkage on cosine distance, stopped at a distance
threshold: no fixed cluster count). A label is a cluster name of that question's model;
``none`` when the rollout has no step, ``outside`` when its step is far from every cluster.

**The version.** The κ name carries the SHA-256 of the weights file (first 12 hex digits), the
64-word-piece cut and the clustering parameters, so another model file or another threshold is
another κ and certificates say which one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .clustering import NO_STEP, ClusterModel, ClusterParams, assign, fit_clusters
from .steps import first_step

__all__ = ["EMBED_DIM", "Embedder", "LearnedKappa", "kappa_learned_name"]

EMBED_DIM = 384  # all-MiniLM-L6-v2


class Embedder(Protocol):
    """What the learned κ needs from a sentence embedder."""

    @property
    def model_sha256(self) -> str:
        """Hex SHA-256 of the weights file."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length embeddings, in order."""
        ...


def kappa_learned_name(domain: str, model_sha256: str, params: ClusterParams) -> str:
    """``<domain>.learned.v1+minilm.<sha256[:12]>.t<tokens>.<params tag>``."""
    from certd.domains.math.first_step import MAX_SEQ_TOKENS  # the embedder's cut (64)

    return f"{domain}.learned.v1+minilm.{model_sha256[:12]}.t{MAX_SEQ_TOKENS}.{params.tag}"


@dataclass
class LearnedKappa:
    """The learned κ of one domain, bound to an embedder and clustering parameters."""

    domain: str
    embedder: Embedder
    params: ClusterParams

    @classmethod
    def load(cls, domain: str, params: ClusterParams, *, threads: int = 1) -> LearnedKappa:
        """Bind the packaged MiniLM model (float32, no screen: the raw vectors are used).

        Raises:
            ConfigError: the model package or its dependencies are missing.
        """
        from certd.kappa.embedder import StepEmbedder

        return cls(domain, StepEmbedder.load(threads=threads, screen="off"), params)

    @property
    def name(self) -> str:
        """The κ name@version."""
        return kappa_learned_name(self.domain, self.embedder.model_sha256, self.params)

    def steps(self, responses: Sequence[str]) -> list[str | None]:
        """Each response's first step (None when it has none)."""
        return [first_step(self.domain, r) for r in responses]

    def fit_steps(self, steps: Sequence[str]) -> ClusterModel:
        """Cluster one question's first steps.

        Raises:
            InvalidInputError: no steps, or over the parameters' bounds.
        """
        return fit_clusters(steps, self.embedder.embed(steps), self.params)

    def fit(self, responses: Sequence[str]) -> ClusterModel:
        """Cluster one question's rollouts by their first steps.

        Raises:
            InvalidInputError: no rollout writes a step, or over the bounds.
        """
        return self.fit_steps([s for s in self.steps(responses) if s is not None])

    def label_steps(self, model: ClusterModel, steps: Sequence[str | None]) -> list[str]:
        """The label of each step under ``model`` (``none`` for None)."""
        known = [s for s in steps if s is not None]
        vectors = dict(zip(known, self.embedder.embed(known), strict=True)) if known else {}
        return [NO_STEP if s is None else assign(model, vectors[s]) for s in steps]

    def labels(self, model: ClusterModel, responses: Sequence[str]) -> list[str]:
        """The label of each response under ``model``."""
        return self.label_steps(model, self.steps(responses))
