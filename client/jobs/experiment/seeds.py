"""Every random seed of the experiment, derived in one place (cleanrl's one seeding block).

Example:
    >>> s = RunSeeds(1)
    >>> s.evaluation, s.rollouts(step=2), s.coverage(step=2, task=3)
    (104730, 1002003, 7984)

The data every arm and seed share do not depend on the run seed: the training and held-out
tasks (``TRAIN_TASKS``, ``HELD_OUT_TASKS``), the fork trees and the unbalanced replay pool
(``FORKTREES``, ``POOL``). Everything a run (arm, seed) draws comes from ``RunSeeds(seed)``, so
two arms with one seed see the same tasks, rollout seeds and evaluation samples.

The arithmetic is the one the committed results were produced with
(``docs/results/exp18``, configuration ``e9b0f70a5565``); a resumed run must draw the same
numbers, so it stays as it is: the multipliers are primes that keep the seeds of different
steps, tasks and samples apart.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "FORKTREES",
    "HELD_OUT_TASKS",
    "POOL",
    "RunSeeds",
    "TRAIN_TASKS",
    "forced_pair_seed",
    "free_task_seed",
    "pool_sample_seed",
    "rollout_seed",
]

TRAIN_TASKS = 5000
"""Seed of the training tasks (``small_countdown_puzzles``), the same for every run."""
HELD_OUT_TASKS = 6000
"""Seed of the held-out tasks, the same for every run."""
FORKTREES = 0
"""Seed of the fork-tree builder (the certified fork trees every arm shares)."""
POOL = 0
"""Base seed of the unbalanced replay pool's samples (``pool_sample_seed``)."""


@dataclass(frozen=True, slots=True)
class RunSeeds:
    """The seeds of one (arm, seed) run, all derived from ``run``.

    Attributes:
        run: the run's seed (``--seed``).
    """

    run: int

    @property
    def torch(self) -> int:
        """``torch.manual_seed`` before the policy loads."""
        return self.run

    @property
    def steps(self) -> int:
        """The ``random.Random`` that picks each step's tasks and shuffles its minibatches."""
        return self.run

    @property
    def replay(self) -> int:
        """The fork-tree SFT data and the replay buffers (``FamilyReplay``)."""
        return self.run

    @property
    def evaluation(self) -> int:
        """The held-out evaluation's sampling (the same at every evaluation of the run)."""
        return 104_729 + self.run

    @property
    def intervention(self) -> int:
        """The entry-prefix intervention's forced samples (see ``forced_pair_seed``)."""
        return self.run

    def coverage(self, step: int, task: int) -> int:
        """Which families a task's forced rollouts cover at a step (``coverage_plan``)."""
        return self.run * 7919 + step * 31 + task

    def rollouts(self, step: int) -> int:
        """The base seed of a step's rollouts (see ``rollout_seed``)."""
        return self.run * 1_000_003 + 1000 * step

    def shuffle(self, step: int) -> int:
        """The null arm's reward permutation at a step."""
        return self.run * 977 + step

    def token_selection(self, step: int, minibatch: int) -> int:
        """Clip-Cov's random token selection in one minibatch of a step."""
        return self.run + step * 13 + minibatch


def rollout_seed(base: int, row: int, sample: int) -> int:
    """One rollout's sampling seed: ``base`` from ``RunSeeds.rollouts``, its plan row and sample."""
    return base + 7 * row + 104_723 * sample


def forced_pair_seed(base: int, task: int, pairs: int) -> int:
    """The forced samples of one intervention pair (held-out task, pairs counted so far)."""
    return base + 31 * task + pairs


def free_task_seed(base: int, task: int) -> int:
    """The intervention's free samples of one held-out task (``free_n`` of them, one batch)."""
    return base + 31 * task + 500_009


def pool_sample_seed(base: int, task: int) -> int:
    """The unbalanced pool's samples of one task."""
    return base + task
