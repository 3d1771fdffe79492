"""Entry-level protection and exact entry metrics (κ families of the first step).

Example:
    >>> round(reach_at_k([0.5, 0.1, 0.0], k=4), 4)
    0.4271
    >>> round(feasible_entropy([0.3, 0.3]), 4)
    0.6931
    >>> feasible_mass([0.3, 0.3])
    0.6
    >>> entry_token_count("<think>25-5=20</think>")
    3

*Exact* metrics use the teacher-forced probability π_f of each feasible family's entry
prefix (for Countdown ``{operand}{operator}`` after ``<think>``), not samples:

* **reach@K** — mean over feasible families of ``1 − (1 − π_f)^K``: the chance K free samples
  enter the family, averaged over families;
* **feasible entropy** — Shannon entropy (nats) of π restricted to the feasible families and
  renormalised;
* **feasible mass** — ``Σ_f π_f``, the share of first steps that open a feasible family.

Protection pieces for a training loop (framework free; the adapters wire some of them):

* ``entry_token_count`` / ``unscore_entry`` — leave the entry tokens out of the loss;
* ``entry_kl`` — KL(π_ref ‖ π) over the feasible families (renormalised), the restoring force
  toward the starting entry distribution, weighted by a knob;
* ``batch_entry_entropy`` — the plug-in entry entropy of a training batch (mean over
  questions), what ``EntropyMonitor`` watches during training.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import torch

__all__ = [
    "batch_entry_entropy",
    "entry_kl",
    "entry_token_count",
    "feasible_entropy",
    "feasible_mass",
    "reach_at_k",
    "unscore_entry",
]

_ENTRY = re.compile(r"^(?:<think>)?([0-9]+[-+*/])")


def _check(probs: Sequence[float]) -> None:
    if any(not (0.0 <= p <= 1.0) or math.isnan(p) for p in probs):
        raise ValueError(f"probabilities must lie in [0, 1], got {list(probs)[:8]}")
    if sum(probs) > 1.0 + 1e-6:
        raise ValueError(f"family probabilities sum to {sum(probs):.6f} > 1 (not disjoint?)")


def reach_at_k(probs: Sequence[float], k: int) -> float:
    """Mean over feasible families of ``1 − (1 − π_f)^k``.

    Raises:
        ValueError: no families, k < 1, or probabilities outside [0, 1] / summing past 1.
    """
    if not probs:
        raise ValueError("expected at least one feasible family")
    if k < 1:
        raise ValueError(f"k: expected >= 1, got {k}")
    _check(probs)
    return sum(1.0 - (1.0 - p) ** k for p in probs) / len(probs)


def feasible_entropy(probs: Sequence[float]) -> float:
    """Entropy (nats) of the family probabilities renormalised over the feasible families.

    0.0 when the feasible mass is 0 (no distribution to speak of).

    Raises:
        ValueError: probabilities outside [0, 1] or summing past 1.
    """
    _check(probs)
    z = sum(probs)
    if z <= 0:
        return 0.0
    return -sum((p / z) * math.log(p / z) for p in probs if p > 0)


def feasible_mass(probs: Sequence[float]) -> float:
    """``Σ π_f`` over the feasible families.

    Raises:
        ValueError: probabilities outside [0, 1] or summing past 1.
    """
    _check(probs)
    return sum(probs)


def entry_token_count(text: str) -> int:
    """Characters (= the embedded policy's tokens) of a Countdown response's entry.

    The entry is the first step's leading operand and its operator right after ``<think>``
    (``"25-"`` in ``"<think>25-5=20…"``, 3 tokens); the ``<think>`` tag itself is not
    counted. 0 when the response does not open with an entry.
    """
    m = _ENTRY.match(text)
    return len(m.group(1)) if m else 0


def unscore_entry(mask: torch.Tensor, starts: Sequence[int], lengths: Sequence[int]) -> None:
    """Clear ``mask[i, starts[i] : starts[i] + lengths[i]]`` in place (entry tokens unscored).

    Raises:
        ValueError: the lengths of ``starts``/``lengths`` differ from the batch, or a value is
            negative.
    """
    if not (len(starts) == len(lengths) == mask.shape[0]):
        raise ValueError(
            f"expected {mask.shape[0]} starts and lengths, got {len(starts)} and {len(lengths)}"
        )
    for i, (s, n) in enumerate(zip(starts, lengths, strict=True)):
        if s < 0 or n < 0:
            raise ValueError(f"row {i}: negative start {s} or length {n}")
        mask[i, s : s + n] = False


def entry_kl(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """KL(π_ref ‖ π) over feasible families, both renormalised over them.

    Args:
        logp: [F] teacher-forced log-probabilities of the feasible families' entry prefixes
            under the trained policy (with gradient).
        logp_ref: [F] the same under the reference (starting) policy.

    Raises:
        ValueError: shapes differ or there are no families.

    Returns:
        A scalar tensor (0 for a single family: nothing to redistribute).
    """
    if logp.shape != logp_ref.shape or logp.dim() != 1 or logp.numel() == 0:
        raise ValueError(
            f"expected two 1-D tensors of one non-zero length, got {tuple(logp.shape)} "
            f"and {tuple(logp_ref.shape)}"
        )
    q = torch.log_softmax(logp, dim=0)
    q_ref = torch.log_softmax(logp_ref.detach(), dim=0)
    return (q_ref.exp() * (q_ref - q)).sum()


def batch_entry_entropy(questions: Sequence[str], families: Sequence[str]) -> float:
    """Plug-in entry entropy of one batch: per question over its rollouts, then the mean.

    Raises:
        ValueError: lengths differ.
    """
    if len(questions) != len(families):
        raise ValueError(f"expected equal lengths, got {len(questions)} and {len(families)}")
    per: dict[str, Counter[str]] = {}
    for q, f in zip(questions, families, strict=True):
        per.setdefault(q, Counter())[f] += 1
    if not per:
        return 0.0
    total = 0.0
    for counts in per.values():
        n = sum(counts.values())
        total -= sum((c / n) * math.log(c / n) for c in counts.values())
    return total / len(per)
