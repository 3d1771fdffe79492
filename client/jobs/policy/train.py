"""Training helpers for the embedded policy: padded batches, sequence log-probs, SFT steps.

Example:
    >>> from forkgate.jobs.policy.policy import Policy
    >>> from forkgate.jobs.policy.model import PolicyConfig
    >>> p = Policy.new(PolicyConfig(vocab_size=28, d_model=32, n_layer=1, n_head=2))
    >>> ex = example(p, {"numbers": [3, 4], "target": 7}, "3+4")
    >>> loss = sft_step(p, [ex], torch.optim.AdamW(p.model.parameters(), lr=1e-3))
    >>> loss > 0
    True

An *example* is (prompt ids, response ids): the response ends with ``<eos>`` and only its
tokens are scored. ``token_logprobs`` gives the per-token log-probabilities of the response
tokens of a padded batch (what SFT minimises and GRPO weights by advantages).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .format import compact_prompt, solution_text
from .policy import Policy

__all__ = [
    "Example",
    "MAX_GRAD_NORM",
    "batch",
    "example",
    "sft_step",
    "token_logprobs",
]

Example = tuple[list[int], list[int]]

MAX_GRAD_NORM = 1.0
"""The gradient-norm clip of every update of the embedded policy (SFT, GRPO, replay)."""


def example(policy: Policy, task: Mapping[str, Any], solution: str) -> Example:
    """The training example of one task and a solution expression (reasoning-then-answer)."""
    tok = policy.tokenizer
    prompt = [tok.bos, *tok.encode(compact_prompt(task))]
    return prompt, [*tok.encode(solution_text(solution)), tok.eos]


def batch(examples: Sequence[Example], pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded inputs [B, T] and a mask [B, T-1] of the scored next-token positions.

    Position j of the mask says whether token j+1 is a response token.
    """
    seqs = [p + r for p, r in examples]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width - 1), dtype=torch.bool)
    for i, ((p, _r), s) in enumerate(zip(examples, seqs, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, len(p) - 1 : len(s) - 1] = True
    return ids, mask


def token_logprobs(policy: Policy, ids: torch.Tensor) -> torch.Tensor:
    """Log-probabilities [B, T-1] of each next token of ``ids`` under the policy."""
    logits, _ = policy.model(ids)
    logp = torch.log_softmax(logits[:, :-1, :].float(), dim=-1)
    return logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def sft_step(policy: Policy, examples: Sequence[Example], opt: torch.optim.Optimizer) -> float:
    """One supervised step (mean token cross-entropy over the responses); returns the loss."""
    policy.model.train()
    ids, mask = batch(examples, policy.tokenizer.pad)
    lp = token_logprobs(policy, ids)
    loss = -(lp * mask).sum() / mask.sum()
    opt.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]  # Tensor.backward is unannotated in torch
    torch.nn.utils.clip_grad_norm_(policy.model.parameters(), MAX_GRAD_NORM)
    opt.step()
    return float(loss.item())
