"""Policy losses of the arms: the shuffled null, PPO-clip, KL-Cov, Clip-Cov.

Plain GRPO advantages come from ``forkgate.advantages.grpo_advantages``.

KL-Cov and Clip-Cov follow Cui et al. 2025 (arXiv:2505.22617) as verl implements them: the
token covariance is ``(A_t − mean A)(log π_t − mean log π)`` over the scored tokens; KL-Cov
adds ``coef·|log π − log π_old|`` on the top ``ratio`` share of tokens by covariance, Clip-Cov
detaches the gradient of a random ``ratio`` share of the tokens whose covariance lies in
``(lb, ub)``. With one on-policy update both penalties vanish, so every arm takes
``minibatches`` updates per batch (the later ones are off-policy, as in PPO).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

__all__ = ["policy_loss", "shuffled_rewards"]


def shuffled_rewards(rewards: Sequence[float], seed: int) -> list[float]:
    """The rewards permuted over the whole batch (the null: reward no longer tracks response)."""
    out = list(rewards)
    random.Random(seed).shuffle(out)
    return out


def policy_loss(
    lp: torch.Tensor,
    old_lp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    kind: str = "pg",
    clip: float = 0.2,
    cov_ratio: float = 0.01,
    kl_coef: float = 1.0,
    cov_bounds: tuple[float, float] = (1.0, 5.0),
    seed: int = 0,
) -> torch.Tensor:
    """PPO-clip loss with sequence-mean aggregation; KL-Cov / Clip-Cov token selections.

    Args:
        lp: [B, T] log-probs with gradient; old_lp: [B, T] at sampling time.
        adv: [B] sequence advantages.
        mask: [B, T] scored tokens.
        kind: ``pg``, ``kl-cov`` or ``clip-cov``.

    Raises:
        ValueError: unknown kind.
    """
    if kind not in ("pg", "kl-cov", "clip-cov"):
        raise ValueError(f"unknown loss {kind!r}")
    a = adv.unsqueeze(1).expand_as(lp)
    ratio = torch.exp(lp - old_lp.detach())
    l1 = -a * ratio
    l2 = -a * torch.clamp(ratio, 1 - clip, 1 + clip)
    tok = torch.maximum(l1, l2)
    valid = mask.bool()
    n_valid = int(valid.sum().item())
    if kind != "pg" and n_valid:
        va, vl = a[valid].detach(), lp[valid].detach()
        cov = torch.zeros_like(lp)
        cov[valid] = (va - va.mean()) * (vl - vl.mean())
        k = max(1, int(cov_ratio * n_valid))
        if kind == "kl-cov":
            flat = torch.where(valid, cov, torch.full_like(cov, -torch.inf)).flatten()
            top = torch.topk(flat, min(k, n_valid)).indices
            pen = torch.zeros_like(lp).flatten()
            pen[top] = 1.0
            tok = tok + kl_coef * pen.view_as(lp) * (lp - old_lp.detach()).abs()
        else:
            window = valid & (cov > cov_bounds[0]) & (cov < cov_bounds[1]) & ~(l2 > l1)
            idx = torch.nonzero(window)
            if len(idx):
                g = torch.Generator().manual_seed(seed)
                pick = idx[torch.randperm(len(idx), generator=g)[:k]]
                corr = torch.ones_like(lp)
                corr[pick[:, 0], pick[:, 1]] = 0.0
                tok = tok * corr
    per_seq = (tok * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    return per_seq.mean()
