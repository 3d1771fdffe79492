"""The embedded policy's side of the experiment: family log-probs, rollout batches, masks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ...entry import entry_token_count, unscore_entry
from ...forktree import countdown_prompt
from ...replay import CoveragePlan
from ..policy.format import THINK
from ..policy.policy import Policy
from ..policy.train import batch
from .seeds import rollout_seed

__all__ = ["Batch", "entry_prefix", "family_logprobs", "sample_batch"]


def entry_prefix(label: str) -> str:
    """The entry text of a κ label: ``"25,-"`` → ``"25-"``."""
    operand, _, operator = label.partition(",")
    return operand + operator


def family_logprobs(policy: Policy, task: Mapping[str, Any], labels: Sequence[str]) -> torch.Tensor:
    """Teacher-forced log π_f of each family's entry prefix after ``<think>`` [F].

    Differentiable (wrap in ``torch.no_grad`` for metrics). The prefixes are disjoint events
    (an operand's digits end at its operator), so the π_f sum to at most 1.
    """
    tok = policy.tokenizer
    head = [*policy.prompt_ids(countdown_prompt(task)), *tok.encode(THINK)]
    seqs = [head + tok.encode(entry_prefix(label)) for label in labels]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), tok.pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width - 1), dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, len(head) - 1 : len(s) - 1] = True
    logits, _ = policy.model(ids)
    logp = torch.log_softmax(logits[:, :-1, :].float(), dim=-1)
    lp = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return (lp * mask).sum(dim=1)


@dataclass
class Batch:
    """One step's rollouts, in order."""

    items: list[tuple[Mapping[str, Any], str]] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    forced: list[bool] = field(default_factory=list)
    examples: list[tuple[list[int], list[int]]] = field(default_factory=list)
    unscored: list[int] = field(default_factory=list)  # response tokens left out at the start
    labels: list[str] = field(default_factory=list)  # the forced κ label ("" when free)


def sample_batch(
    policy: Policy,
    tasks: Sequence[tuple[int, Mapping[str, Any], list[CoveragePlan]]],
    *,
    group_size: int,
    max_tokens: int,
    seed: int,
    unscored_entry: bool,
) -> Batch:
    """Free and forced rollouts of each (index, task, plan); the forced prefix is unscored."""
    tok = policy.tokenizer
    out = Batch()
    for idx, task, plan in tasks:
        prompt = countdown_prompt(task)
        free = group_size - sum(p.n for p in plan)
        parts: list[tuple[str | None, int]] = [(None, free)]
        parts += [(THINK + entry_prefix(p.family), p.n) for p in plan]
        labels = ["", *(p.family for p in plan)]
        prompt_ids = policy.prompt_ids(prompt)
        for j, (prefix, n) in enumerate(parts):
            [group] = policy.sample(
                [prompt],
                n=n,
                max_tokens=max_tokens,
                seed=rollout_seed(seed, idx, j),
                prefix=prefix,
            )
            for s in group:
                head = prefix or THINK
                ended = [tok.eos] if s.finish_reason == "stop" else []
                out.items.append((task, s.text))
                out.questions.append(str(idx))
                out.forced.append(prefix is not None)
                out.labels.append(labels[j])
                out.examples.append((prompt_ids, tok.encode(head) + list(s.token_ids) + ended))
                skip = len(tok.encode(head))
                if prefix is None and unscored_entry:
                    skip += entry_token_count(s.text)
                out.unscored.append(skip)
    return out


def scored_mask(b: Batch, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded ids and the loss mask with each row's unscored head cleared."""
    ids, mask = batch(b.examples, pad)
    unscore_entry(mask, [len(p) - 1 for p, _ in b.examples], b.unscored)
    return ids, mask
