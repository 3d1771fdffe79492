"""Learned entry functions: per-question clusters of first steps, and how they are judged.

Example::

    from certd.kappa import ClusterParams, LearnedKappa
    kappa = LearnedKappa.load("math", ClusterParams())
    model = kappa.fit(rollouts)          # one question's rollouts
    kappa.labels(model, rollouts)

``cluster`` and ``agreement`` are pure NumPy/stdlib; ``learned`` binds them to the packaged
embedding model (loaded only by ``LearnedKappa.load``). See docs/kappa-calibration.md.
"""

from __future__ import annotations

from .agreement import adjusted_rand_index, purity
from .clustering import NO_STEP, OUTSIDE, ClusterModel, ClusterParams, assign, fit_clusters
from .learned import LearnedKappa, kappa_learned_name
from .steps import first_step

__all__ = [
    "ClusterModel",
    "ClusterParams",
    "LearnedKappa",
    "NO_STEP",
    "OUTSIDE",
    "adjusted_rand_index",
    "assign",
    "first_step",
    "fit_clusters",
    "kappa_learned_name",
    "purity",
]
