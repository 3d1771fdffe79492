"""The mechanism experiment (``forkgate experiment countdown``): entry-level protection, tested.

Every arm starts from the shipped embedded policy and trains with the same tasks, sampling
seeds and rollout budget; each (arm, seed) run appends one JSON line to
``<workdir>/results.jsonl`` and a rerun skips the pairs already there (same configuration),
so the protocol runs in parts. ``forkgate.jobs.experiment.analysis`` turns the file into paired
differences with intervals, the pre-registered verdicts and plots. See
``docs/experiment-countdown.md``.

Modules: ``options`` (the knobs, one docstring each), ``seeds`` (every RNG seed, derived from
the run seed in one place), ``arms`` (what each arm changes), ``policyops`` (rollouts, masks,
teacher-forced family log-probs), ``losses`` (the null, PPO-clip, KL-Cov, Clip-Cov; plain GRPO
advantages are ``forkgate.advantages.grpo_advantages``), ``data`` (fork trees through the
ratchet, replay pools), ``evaluate`` (sampled and exact metrics, the intervention), ``train``
(one run), ``protocol`` (the resumable runner), ``analysis``.
"""

from __future__ import annotations

from .arms import ARMS, ArmSpec, parse_arm
from .options import KEY_ARMS, ExperimentOptions
from .protocol import run_experiment

__all__ = [
    "ARMS",
    "ArmSpec",
    "ExperimentOptions",
    "KEY_ARMS",
    "parse_arm",
    "run_experiment",
]
