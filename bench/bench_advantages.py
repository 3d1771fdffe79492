"""Stratified advantages on 64k rollouts: the (question, family) estimator vs plain GRPO.

Peer: GRPO's per-question normalisation as TRL computes it (rewards viewed as
[questions, rollouts], mean and std per row), in torch on the same rewards. Ours:
``stratified_advantages`` with the prior looked up from a warm sliding window and the window
updated (ids as tensors), and the whole ``StratifiedAdvantages`` call from string keys.

Run: ``.venv/bin/python bench/bench_advantages.py`` → ``bench/results/advantages.json``.
"""

from __future__ import annotations

import random

import torch
from _common import median, timed_runs, write

from forkgate.advantages import PriorWindow, StratifiedAdvantages, stratified_advantages

QUESTIONS, ROLLOUTS = 4096, 16  # 65,536 rollouts
TARGET_MS = 50.0


def batch(seed: int) -> tuple[torch.Tensor, list[str], list[str]]:
    rng = random.Random(seed)
    questions = [f"q{i}" for i in range(QUESTIONS) for _ in range(ROLLOUTS)]
    families = [rng.choices(["25,-", "4,*", "3,+", "7,/"], [8, 4, 2, 1])[0] for _ in questions]
    rewards = torch.tensor([float(rng.random() < 0.4) for _ in questions])
    return rewards, questions, families


def main() -> None:
    torch.manual_seed(0)
    batches = [batch(s) for s in range(6)]
    rewards, questions, families = batches[-1]

    def grpo() -> torch.Tensor:
        r = rewards.view(QUESTIONS, ROLLOUTS)
        return ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).view(-1)

    full = StratifiedAdvantages(window_batches=4, scale="family")
    for r, q, f in batches[:-1]:
        full(r, q, f)
    ids = full.group_ids(questions, families)
    window = PriorWindow(4)
    for r, q, f in batches[:-1]:
        window.update(full.group_ids(q, f), r)

    def tensors() -> None:
        adv = stratified_advantages(rewards, ids, window.prior(ids), scale="family")
        window.update(ids, rewards)
        assert adv.shape == rewards.shape

    def strings() -> None:
        full(rewards, questions, families)

    n = len(questions)
    grpo_ms = median(timed_runs(grpo, 21)) * 1e3
    tensor_ms = median(timed_runs(tensors, 11)) * 1e3
    string_ms = median(timed_runs(strings, 11)) * 1e3
    write(
        "advantages",
        {
            "rollouts": n,
            "groups_per_batch": int(torch.unique(ids).numel()),
            "torch_threads": torch.get_num_threads(),
            "median_ms": {
                "grpo_per_question_trl_style": round(grpo_ms, 3),
                "stratified_ids_as_tensors_with_prior_window": round(tensor_ms, 3),
                "stratified_from_string_keys": round(string_ms, 3),
            },
            "ratio_stratified_tensors_over_grpo": round(tensor_ms / grpo_ms, 2),
            "target": {
                "ms_under": TARGET_MS,
                "measured_ms": round(tensor_ms, 3),
                "met": tensor_ms < TARGET_MS,
                "met_from_string_keys": string_ms < TARGET_MS,
            },
        },
    )


if __name__ == "__main__":
    main()
