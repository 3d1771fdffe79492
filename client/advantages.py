"""Stratified GRPO advantages: groups keyed by (question, entry family), with a family prior.

Example:
    >>> import torch
    >>> adv = StratifiedAdvantages(window_batches=8)
    >>> families = ["25,-", "25,-", "4,*", "3,+"]
    >>> a = adv(torch.tensor([1.0, 0.0, 1.0, 1.0]), ["q1"] * 4, families)
    >>> [round(x, 3) for x in a.tolist()]
    [0.75, -0.75, 0.5, 0.5]

Plain GRPO normalises each question's rollouts together, so the rollouts of a rare entry
family are judged against the common family's successes, and a family that appears once in a
group gets advantage zero after per-group normalisation whatever its reward. Here the group is
(question, κ(τ)) and each group's baseline is shrunk toward a prior success rate of that
family, learned from earlier batches, so a family seen once or never still gets a signal.

Formulas (rollout i, group g = (question, family) of i, batch B; see
``docs/stratified-advantages.md`` for the worked example above):

* Prior from a sliding window of the last ``window_batches`` batches *before* B (the batch
  never enters its own prior), with Laplace smoothing::

      p_g = (S_g^win + alpha) / (N_g^win + alpha + beta)

  where S^win is the summed reward and N^win the number of rollouts of g in the window
  (rewards are taken to lie in [0, 1], so p_g is a smoothed success rate; default
  alpha = beta = 1 gives p = 1/2 for a family never seen).
* Baseline: the leave-one-out mean of the other rollouts of g in B, shrunk toward p_g with
  ``prior_weight`` (lambda) pseudo-rollouts::

      b_i = (S_g - r_i + lambda * p_g) / (n_g - 1 + lambda)

  so r_i never enters its own baseline; for a singleton group (n_g = 1) b_i = p_g.
* Advantage ``A_i = r_i - b_i``, then scaled by ``scale``:
  - ``"none"``: A_i as is;
  - ``"family"``: A_i / (sigma_g + eps), with the smoothed group deviation
    ``sigma_g^2 = (sum_j (r_j - m_g)^2 + lambda * p_g * (1 - p_g)) / (n_g + lambda)`` and
    ``m_g = (S_g + lambda * p_g) / (n_g + lambda)``, i.e. the prior counted as lambda
    pseudo-rollouts of Bernoulli variance; sigma_g > 0 whenever 0 < p_g < 1;
  - ``"batch"``: A_i / (std(A over B) + eps) (population std).
* ``eps = 1e-6`` by default.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Literal

import torch

__all__ = [
    "PriorWindow",
    "Scale",
    "StratifiedAdvantages",
    "TRAINER_SCALE",
    "forced_entry_credit",
    "grpo_advantages",
    "stratified_advantages",
]

Scale = Literal["none", "family", "batch"]

TRAINER_SCALE: Scale = "family"
"""The scale the TRL and verl adapters default to (the formula's own default is ``"none"``).

A trainer's GRPO loss is tuned for advantages of unit scale, as plain GRPO's
``(r - mean) / std`` are; ``"family"`` divides by the smoothed deviation of the (question,
family) group and so keeps that scale, while ``"none"`` gives the raw ``r - b`` of the
formula (what the tests and the worked example in ``docs/stratified-advantages.md`` show)."""


def grpo_advantages(
    rewards: Sequence[float], questions: Sequence[str], *, eps: float = 1e-6
) -> list[float]:
    """Plain GRPO advantages: ``(r - mean) / (std + eps)`` within each question's group.

    The deviation is the population one (divided by n), as in DeepSeekMath's GRPO. A group
    whose rewards are all equal gets zeros.

    Example:
        >>> [round(a, 3) for a in grpo_advantages([1.0, 0.0, 1.0, 1.0], ["a", "a", "b", "b"])]
        [1.0, -1.0, 0.0, 0.0]

    Raises:
        ValueError: the lengths differ.

    Returns:
        One advantage per rollout, in the input order.
    """
    if len(rewards) != len(questions):
        raise ValueError(
            f"expected one question per reward, got {len(questions)} and {len(rewards)}"
        )
    groups: dict[str, list[float]] = {}
    for q, r in zip(questions, rewards, strict=True):
        groups.setdefault(q, []).append(r)
    stats = {}
    for q, rs in groups.items():
        mean = sum(rs) / len(rs)
        std = (sum((r - mean) ** 2 for r in rs) / len(rs)) ** 0.5
        stats[q] = (mean, std)
    return [
        (r - stats[q][0]) / (stats[q][1] + eps) for q, r in zip(questions, rewards, strict=True)
    ]


def stratified_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    prior: torch.Tensor,
    *,
    prior_weight: float = 1.0,
    scale: Scale = "none",
    eps: float = 1e-6,
) -> torch.Tensor:
    """Advantages of one batch with (question, family) groups; see the module docstring.

    Args:
        rewards: float tensor [N], rewards in [0, 1].
        group_ids: int64 tensor [N]; rollouts with the same id share a group.
        prior: float tensor [N], the prior success rate p_g of each rollout's group.
        prior_weight: lambda, the prior's weight in pseudo-rollouts (> 0).
        scale: ``"none"``, ``"family"`` or ``"batch"``.
        eps: added to the deviation before dividing.

    Raises:
        ValueError: shapes differ, the prior weight is not positive, or the scale is unknown.

    Returns:
        Float tensor [N] of advantages.
    """
    if not (rewards.shape == group_ids.shape == prior.shape) or rewards.dim() != 1:
        raise ValueError(
            f"expected three 1-D tensors of one length, got {tuple(rewards.shape)}, "
            f"{tuple(group_ids.shape)}, {tuple(prior.shape)}"
        )
    if prior_weight <= 0:
        raise ValueError(f"prior_weight: expected > 0, got {prior_weight}")
    if scale not in ("none", "family", "batch"):
        raise ValueError(f"scale: expected none, family or batch, got {scale!r}")
    r = rewards.to(torch.float64)
    p = prior.to(torch.float64)
    lam = float(prior_weight)
    _, inverse = torch.unique(group_ids, return_inverse=True)
    groups = int(inverse.max().item()) + 1 if inverse.numel() else 0
    sums = torch.zeros(groups, dtype=torch.float64).index_add_(0, inverse, r)
    counts = torch.zeros(groups, dtype=torch.float64).index_add_(0, inverse, torch.ones_like(r))
    s_g, n_g = sums[inverse], counts[inverse]
    baseline = (s_g - r + lam * p) / (n_g - 1 + lam)
    adv = r - baseline
    if scale == "family":
        m_g = (s_g + lam * p) / (n_g + lam)
        sq = torch.zeros(groups, dtype=torch.float64).index_add_(0, inverse, (r - m_g) ** 2)
        sigma = torch.sqrt((sq[inverse] + lam * p * (1 - p)) / (n_g + lam))
        adv = adv / (sigma + eps)
    elif scale == "batch" and adv.numel():
        adv = adv / (adv.std(unbiased=False) + eps)
    return adv.to(rewards.dtype)


class PriorWindow:
    """Per-group reward sums and counts over the last ``window_batches`` batches.

    Args:
        window_batches: batches remembered.
        alpha: Laplace pseudo-successes.
        beta: Laplace pseudo-failures.
    """

    def __init__(self, window_batches: int = 16, alpha: float = 1.0, beta: float = 1.0) -> None:
        if window_batches < 1 or alpha <= 0 or beta <= 0:
            raise ValueError("window_batches >= 1 and alpha, beta > 0 are required")
        self.alpha = alpha
        self.beta = beta
        self._window: deque[dict[int, tuple[float, int]]] = deque(maxlen=window_batches)
        self._totals: dict[int, tuple[float, int]] = {}

    def prior(self, group_ids: torch.Tensor) -> torch.Tensor:
        """The smoothed success rate of each rollout's group (from earlier batches only)."""
        keys, inverse = torch.unique(group_ids, return_inverse=True)
        a, b = self.alpha, self.beta
        totals = self._totals
        rates = [(s + a) / (n + a + b) for s, n in (totals.get(k, (0.0, 0)) for k in keys.tolist())]
        return torch.tensor(rates, dtype=torch.float64)[inverse]

    def update(self, group_ids: torch.Tensor, rewards: torch.Tensor) -> None:
        """Add one batch to the window (dropping the oldest batch when full)."""
        keys, inverse = torch.unique(group_ids, return_inverse=True)
        sums = torch.zeros(len(keys), dtype=torch.float64).index_add_(
            0, inverse, rewards.to(torch.float64)
        )
        counts = torch.bincount(inverse, minlength=len(keys))
        batch = dict(
            zip(keys.tolist(), zip(sums.tolist(), counts.tolist(), strict=True), strict=True)
        )
        if len(self._window) == self._window.maxlen:
            for k, (s, n) in self._window[0].items():
                ts, tn = self._totals[k]
                if tn == n:
                    del self._totals[k]
                else:
                    self._totals[k] = (ts - s, tn - n)
        self._window.append(batch)
        for k, (s, n) in batch.items():
            ts, tn = self._totals.get(k, (0.0, 0))
            self._totals[k] = (ts + s, tn + n)


class StratifiedAdvantages:
    """Stratified advantages batch after batch: keys, the prior window, the formula.

    Call it with each batch's rewards, question ids and family labels; it computes the
    advantages with the prior from earlier batches, then adds the batch to the window.

    Args:
        window_batches: batches in the prior's sliding window.
        alpha: Laplace pseudo-successes of the prior.
        beta: Laplace pseudo-failures of the prior.
        prior_weight: lambda, the prior's weight in pseudo-rollouts.
        scale: ``"none"``, ``"family"`` or ``"batch"``.
        eps: added to deviations before dividing.
    """

    def __init__(
        self,
        *,
        window_batches: int = 16,
        alpha: float = 1.0,
        beta: float = 1.0,
        prior_weight: float = 1.0,
        scale: Scale = "none",
        eps: float = 1e-6,
    ) -> None:
        self.window = PriorWindow(window_batches, alpha, beta)
        self.prior_weight = prior_weight
        self.scale: Scale = scale
        self.eps = eps
        self._ids: dict[tuple[str, str], int] = {}

    def group_ids(self, questions: Sequence[str], families: Sequence[str]) -> torch.Tensor:
        """Stable int64 ids of (question, family) keys, the same across batches."""
        if len(questions) != len(families):
            raise ValueError(
                f"expected as many families as questions, got {len(families)} and {len(questions)}"
            )
        ids = self._ids
        out = [ids.setdefault(key, len(ids)) for key in zip(questions, families, strict=True)]
        return torch.tensor(out, dtype=torch.int64)

    def __call__(
        self, rewards: torch.Tensor, questions: Sequence[str], families: Sequence[str]
    ) -> torch.Tensor:
        """Advantages for one batch; then the batch joins the prior window.

        Raises:
            ValueError: lengths differ.
        """
        groups = self.group_ids(questions, families)
        if groups.shape != rewards.shape:
            raise ValueError(f"expected {len(groups)} rewards, got {tuple(rewards.shape)}")
        adv = stratified_advantages(
            rewards,
            groups,
            self.window.prior(groups),
            prior_weight=self.prior_weight,
            scale=self.scale,
            eps=self.eps,
        )
        self.window.update(groups, rewards)
        return adv


def informed_stratified_advantages(
    rewards: Sequence[float],
    questions: Sequence[str],
    families: Sequence[str],
    *,
    forced: Sequence[bool] | None = None,
    prior_weight: float = 1.0,
    entry_weight: float = 1.0,
) -> tuple[list[float], list[float]]:
    """Stratified advantages v2: an execution term within the family, an informed entry term.

    For rollout i of question q in family g = (q, κ_i), with the batch's rollouts only:

    * ``V(q)``: the mean reward of q's *free* rollouts (all of q's rollouts when none is free),
      the policy's own value of the question;
    * ``V(q, κ)``: the family's pooled value over its free *and* forced rollouts, shrunk
      toward ``V(q)`` with ``prior_weight`` (c) pseudo-rollouts:
      ``(S_g + c·V(q)) / (n_g + c)`` — never an uninformed constant;
    * execution term ``r_i − mean_{j∈g, j≠i} r_j`` (leave-one-out within the family; 0 for
      a singleton family, which has nothing to compare with);
    * entry term ``V(q, κ_i) − V(q)`` (the cross-family comparison), weighted by
      ``entry_weight``; forced rollouts get no entry term (their entry was not chosen).

    Returns ``(total, entry)``: the per-rollout advantage ``exec + entry_weight·entry`` and
    the entry term alone (so a caller can put it only on the entry tokens). All-equal rewards
    give zeros; one family only gives entry terms of 0 (V(q, κ) = V(q)).

    Raises:
        ValueError: lengths differ or ``prior_weight`` is negative.
    """
    n = len(rewards)
    flags = list(forced) if forced is not None else [False] * n
    if not (len(questions) == len(families) == len(flags) == n):
        raise ValueError(
            f"expected equal lengths, got {n} rewards, {len(questions)} questions, "
            f"{len(families)} families, {len(flags)} forced flags"
        )
    if prior_weight < 0:
        raise ValueError(f"prior_weight: expected >= 0, got {prior_weight}")
    q_free: dict[str, list[float]] = {}
    q_all: dict[str, list[float]] = {}
    g_sum: dict[tuple[str, str], float] = {}
    g_n: dict[tuple[str, str], int] = {}
    for r, q, f, fo in zip(rewards, questions, families, flags, strict=True):
        q_all.setdefault(q, []).append(r)
        if not fo:
            q_free.setdefault(q, []).append(r)
        g_sum[(q, f)] = g_sum.get((q, f), 0.0) + r
        g_n[(q, f)] = g_n.get((q, f), 0) + 1
    v_q = {q: sum(q_free.get(q) or rs) / len(q_free.get(q) or rs) for q, rs in q_all.items()}
    total, entry = [], []
    for r, q, f, fo in zip(rewards, questions, families, flags, strict=True):
        s, k = g_sum[(q, f)], g_n[(q, f)]
        execution = r - (s - r) / (k - 1) if k > 1 else 0.0
        value = (s + prior_weight * v_q[q]) / (k + prior_weight)
        e = 0.0 if fo else value - v_q[q]
        entry.append(e)
        total.append(execution + entry_weight * e)
    return total, entry


def forced_entry_credit(
    rewards: Sequence[float],
    questions: Sequence[str],
    families: Sequence[str],
    forced: Sequence[bool],
    entry_prob: Sequence[float],
    *,
    floor: float | None = None,
    cap: float = 1.0,
) -> tuple[list[float], list[float]]:
    """Plain GRPO for free rollouts; entry credit for successful forced entries of
    under-covered families (``docs/stratified-advantages.md``, "Expected entry gradient").

    For question q with G free rollouts of mean V̂ (all of q's rollouts when none is free):

    * free rollout i: advantage ``r_i − V̂``, entry credit 0 (its sampled entry tokens carry
      the advantage already);
    * forced rollout j of family f, m forced rollouts of (q, f): execution advantage
      ``r_j − mean of the other forced rollouts of (q, f)`` (0 alone); when no free rollout
      of q entered f, entry credit ``w_f · (G / m) · max(0, r_j − V̂)`` with
      ``w_f = clip(entry_prob_j, floor, cap)`` (the policy's own probability of the entry,
      clipped; ``floor`` defaults to 1 / G), else 0.

    The caller applies the entry credit to the teacher-forced log-probability of the forced
    entry and the advantage to the rollout's scored tokens, both in the same units.

    Returns:
        ``(advantage, entry_credit)``, one each per rollout.

    Raises:
        ValueError: lengths differ, or ``cap`` is below the floor.
    """
    n = len(rewards)
    if not (len(questions) == len(families) == len(forced) == len(entry_prob) == n):
        raise ValueError(f"expected {n} questions, families, forced flags and entry probs")
    free, every, entered, fsum, fn = _forced_stats(rewards, questions, families, forced)
    adv, credit = [], []
    for r, q, f, fo, p in zip(rewards, questions, families, forced, entry_prob, strict=True):
        rs = free.get(q) or every[q]
        v = sum(rs) / len(rs)
        if not fo:
            adv.append(r - v)
            credit.append(0.0)
            continue
        m = fn[(q, f)]
        adv.append(r - (fsum[(q, f)] - r) / (m - 1) if m > 1 else 0.0)
        lo = 1.0 / max(1, len(free.get(q, []))) if floor is None else floor
        if cap < lo:
            raise ValueError(f"cap {cap} is below the floor {lo}")
        w = min(cap, max(lo, p))
        g = len(free.get(q, []))
        credit.append(0.0 if (q, f) in entered else w * (g / m) * max(0.0, r - v))
    return adv, credit


def _forced_stats(
    rewards: Sequence[float],
    questions: Sequence[str],
    families: Sequence[str],
    forced: Sequence[bool],
) -> tuple[
    dict[str, list[float]],
    dict[str, list[float]],
    set[tuple[str, str]],
    dict[tuple[str, str], float],
    dict[tuple[str, str], int],
]:
    """Free rewards and all rewards per question; (q, f) entered freely; forced sums, counts."""
    free: dict[str, list[float]] = {}
    every: dict[str, list[float]] = {}
    entered: set[tuple[str, str]] = set()
    fsum: dict[tuple[str, str], float] = {}
    fn: dict[tuple[str, str], int] = {}
    for r, q, f, fo in zip(rewards, questions, families, forced, strict=True):
        every.setdefault(q, []).append(r)
        if fo:
            fsum[(q, f)] = fsum.get((q, f), 0.0) + r
            fn[(q, f)] = fn.get((q, f), 0) + 1
        else:
            free.setdefault(q, []).append(r)
            entered.add((q, f))
    return free, every, entered, fsum, fn
