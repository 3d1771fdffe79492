"""The experiment's options: one typed object, one docstring per knob (cleanrl's ``Args``).

Example:
    >>> opts = ExperimentOptions(steps=2, seeds=(0,))
    >>> opts.group_size, opts.lr, opts.eval_tasks, opts.free_n
    (16, 0.0002, 256, 64)

Every field after ``threads`` changes a run's result and enters the configuration key of
``results.jsonl`` (``protocol.config_key``); ``workdir``, ``arms``, ``seeds`` and ``threads``
do not, nor do the fields of ``protocol.LEGACY`` at their legacy value. The defaults are
issue 18's protocol (200 steps, 256 held-out tasks × 32 samples, the intervention at start and
end with 64 free samples per pair, 5 paired seeds); reduced sizes are flags. The seeds a run
draws are derived from its seed in ``seeds``, not set here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ExperimentOptions", "KEY_ARMS"]

KEY_ARMS = ("grpo", "grpo-unscored", "grpo+replay", "strat-v2")
"""The arms a default experiment runs (specs of ``forkgate.jobs.experiment.arms``)."""


@dataclass
class ExperimentOptions:
    """The protocol's size and settings (the ``forkgate experiment countdown`` flags)."""

    workdir: Path = Path("out/experiment")
    """Outputs: ``results.jsonl`` (one line per finished (arm, seed)), fork trees, certd data,
    ``analysis.json`` and plots; kept between runs (resumable)."""
    arms: tuple[str, ...] = KEY_ARMS
    """Arm specs (``forkgate.jobs.experiment.arms``)."""
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """Paired run seeds: every arm runs each seed with the same tasks and sampling seeds."""
    threads: int = 1
    """torch CPU threads."""

    steps: int = 200
    """GRPO steps per run."""
    tasks: int = 256
    """Training tasks (drawn with ``seeds.TRAIN_TASKS``, the same for every run)."""
    prompts_per_step: int = 8
    """Training tasks per GRPO step."""
    group_size: int = 16
    """Rollouts per task per step, the forced rollouts of fork coverage included."""
    per_family: int = 2
    """Forced rollouts per covered family (fork coverage)."""
    eval_tasks: int = 256
    """Held-out tasks (drawn with ``seeds.HELD_OUT_TASKS``, the same for every run)."""
    eval_n: int = 32
    """Samples per held-out task at each evaluation."""
    eval_every: int = 0
    """GRPO steps between evaluations (0: only at the start and the end)."""
    lr: float = 2e-4
    """AdamW learning rate of the GRPO updates."""
    minibatches: int = 2
    """Policy updates per batch (PPO-style; the later ones are off-policy)."""
    clip: float = 0.2
    """The PPO ratio clip ε: the ratio is clipped to [1 − ε, 1 + ε]."""
    cov_ratio: float = 0.01
    """Share of the scored tokens KL-Cov / Clip-Cov select."""
    kl_cov_coef: float = 1.0
    """KL-Cov's penalty coefficient on the selected tokens."""
    clip_cov_bounds: tuple[float, float] = field(default=(1.0, 5.0))
    """Clip-Cov's covariance window (low, high)."""
    replay_n: int = 16
    """Replay examples per step (split over the minibatches)."""
    forktree_tasks: int = 128
    """Training tasks (the first ones) that get fork trees."""
    forktree_budget: int = 32
    """Samples per task at most when building a fork tree."""
    pool_n: int = 8
    """Samples per fork-tree task for the unbalanced replay pool."""
    sft_steps: int = 40
    """Fork-tree SFT steps before GRPO (arm ``sft+grpo``)."""
    sft_lr: float = 1e-4
    """AdamW learning rate of the fork-tree SFT."""
    low_reach: float = 0.05
    """Families whose exact π_f is below this are forced in the intervention."""
    forced_n: int = 8
    """Forced samples per intervention pair."""
    free_n: int = 64
    """Free samples per intervention pair (drawn per held-out task, shared by its pairs); the
    intervention then runs at the end and, on the same pairs and seeds, under the starting
    policy. 0: the first runs' intervention (end only, free rate from the evaluation samples;
    left out of the configuration key, so their results resume)."""
    max_pairs: int = 48
    """Intervention pairs (held-out task, low-reach family) at most."""
    max_tokens: int = 80
    """Generation length in tokens."""
    frontier: bool = False
    """Issue 33's frontier runs: the ``eval_every`` evaluations are on the multi-family
    held-out tasks, and ``grpo`` keeps its checkpoints and evaluates the interpolations
    (``frontier.py``). False: left out of the configuration key."""
    interp_alphas: tuple[float, ...] = (0.25, 0.5, 0.75)
    """The α of θ = (1 − α) θ_start + α θ_GRPO(step) (frontier runs); left out of the key at
    this default."""
