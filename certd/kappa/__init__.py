"""Learned entry functions: per-question clusters of first steps, and how they are judged.

Example::

    from certd.kappa import ClusterParams, LearnedKappa
    kappa = LearnedKappa.load("math", ClusterParams())
    model = kappa.fit(rollouts)          # one question's rollouts
    kappa.labels(model, rollouts)

``cluster`` and ``agreement`` are pure NumPy/stdlib; ``learned`` binds them to the packaged
embedding model (loaded only by ``LearnedKappa.load``). See docs/kappa-calibration.md.
Each public name's module is imported on first use (PEP 562): a server names its math κ
through ``certd.kappa.weights`` and loads no NumPy until it clusters or embeds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from certd.lazyexports import lazy_exports

if TYPE_CHECKING:
    from .agreement import adjusted_rand_index, purity
    from .clustering import NO_STEP, OUTSIDE, ClusterModel, ClusterParams, assign, fit_clusters
    from .learned import LearnedKappa, kappa_learned_name
    from .steps import first_step

_WHERE = {
    "agreement": ("adjusted_rand_index", "purity"),
    "clustering": ("NO_STEP", "OUTSIDE", "ClusterModel", "ClusterParams", "assign", "fit_clusters"),
    "learned": ("LearnedKappa", "kappa_learned_name"),
    "steps": ("first_step",),
}
__getattr__ = lazy_exports(__name__, _WHERE)


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
