"""The experiment's options (size, seeds, knobs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .arms import KEY_ARMS

__all__ = ["ExperimentOptions"]


@dataclass
class ExperimentOptions:
    """The protocol's size and settings.

    Attributes:
        workdir: outputs: ``results.jsonl`` (one line per finished (arm, seed)), fork trees,
            certd data, ``analysis.json`` and plots; kept between runs (resumable).
        arms: arm specs (``forkgate.jobs.experiment.arms``).
        seeds: paired seeds; every arm runs each seed with the same tasks and sampling seeds.
        steps: GRPO steps per run.
        tasks: training tasks (drawn with ``seed + 5000``).
        prompts_per_step: tasks per step.
        group_size: rollouts per task per step (forced rollouts of fork coverage included).
        per_family: forced rollouts per covered family (fork coverage).
        eval_tasks: held-out tasks (drawn with ``seed + 6000``; the same for every seed).
        eval_n: samples per held-out task.
        eval_every: steps between evaluations (0: only at the start and the end).
        lr: AdamW learning rate.
        minibatches: policy updates per batch (PPO-style; the second is off-policy).
        clip: the PPO ratio clip.
        cov_ratio: share of tokens KL-Cov / Clip-Cov select.
        kl_cov_coef: KL-Cov's penalty coefficient.
        clip_cov_bounds: Clip-Cov's covariance window.
        replay_n: replay examples per step.
        forktree_tasks: training tasks (the first ones) with fork trees.
        forktree_budget: samples per task when building a fork tree.
        pool_n: samples per fork-tree task for the unbalanced replay pool.
        sft_steps: fork-tree SFT steps (``sft+grpo``).
        sft_lr: SFT learning rate.
        low_reach: families with exact π_f below this are forced in the intervention.
        forced_n: forced samples per intervention pair.
        max_pairs: intervention pairs at most.
        threads: torch CPU threads.
        max_tokens: generation length.
    """

    workdir: Path = Path("out/experiment")
    arms: tuple[str, ...] = KEY_ARMS
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 80
    tasks: int = 256
    prompts_per_step: int = 8
    group_size: int = 16
    per_family: int = 2
    eval_tasks: int = 64
    eval_n: int = 16
    eval_every: int = 0
    lr: float = 2e-4
    minibatches: int = 2
    clip: float = 0.2
    cov_ratio: float = 0.01
    kl_cov_coef: float = 1.0
    clip_cov_bounds: tuple[float, float] = field(default=(1.0, 5.0))
    replay_n: int = 16
    forktree_tasks: int = 128
    forktree_budget: int = 32
    pool_n: int = 8
    sft_steps: int = 40
    sft_lr: float = 1e-4
    low_reach: float = 0.05
    forced_n: int = 8
    max_pairs: int = 48
    threads: int = 1
    max_tokens: int = 80
