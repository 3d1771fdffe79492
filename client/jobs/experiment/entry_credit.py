"""Arm ``grpo+fec``: GRPO plus entry credit for forced entries (``forced_entry_credit``).

The forced rollouts' prefix stays out of the PPO loss (``sample_batch``); their entry credit
enters as ``−credit_j · log π(label_j | q)`` on the teacher-forced entry log-probability, in the
advantages' units (both divided by the batch's advantage std), averaged over the minibatch
as the PPO loss averages over rollouts. See ``docs/stratified-advantages.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ...advantages import forced_entry_credit
from ..policy.policy import Policy
from .policyops import Batch, family_logprobs

__all__ = ["entry_credit_loss", "fec_advantages"]


def fec_advantages(
    policy: Policy,
    tasks: Sequence[Mapping[str, Any]],
    rewards: list[float],
    b: Batch,
    families: list[str],
) -> tuple[torch.Tensor, list[float]]:
    """Per-rollout advantages and entry credits, scaled to unit advantage std over the batch."""
    probs: dict[tuple[str, str], float] = {}
    with torch.no_grad():
        for q, fo, label in zip(b.questions, b.forced, b.labels, strict=True):
            if fo and (q, label) not in probs:
                lp = family_logprobs(policy, tasks[int(q)], [label])
                probs[(q, label)] = float(lp.exp()[0])
    fams = [lab if fo else f for f, fo, lab in zip(families, b.forced, b.labels, strict=True)]
    pis = [probs.get((q, lab), 1.0) for q, lab in zip(b.questions, b.labels, strict=True)]
    adv, credit = forced_entry_credit(rewards, b.questions, fams, b.forced, pis)
    a = torch.tensor(adv)
    sd = float(a.std(unbiased=False)) + 1e-6
    return a / sd, [c / sd for c in credit]


def entry_credit_loss(
    policy: Policy,
    tasks: Sequence[Mapping[str, Any]],
    b: Batch,
    credit: Sequence[float],
    rows: Sequence[int],
) -> torch.Tensor:
    """``−(1/|rows|) Σ_j credit_j · log π(entry_j)`` over the minibatch's credited rows."""
    terms = [
        credit[j] * family_logprobs(policy, tasks[int(b.questions[j])], [b.labels[j]])[0]
        for j in rows
        if credit[j] > 0
    ]
    if not terms:
        return torch.zeros(())
    return -torch.stack(terms).sum() / max(1, len(rows))
