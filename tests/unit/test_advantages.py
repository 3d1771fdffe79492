"""Stratified advantages: the vectorised torch code against a plain-Python reference."""

from __future__ import annotations

import itertools
import math
import random
from collections import defaultdict

import pytest
import torch

from forkgate.advantages import (
    PriorWindow,
    StratifiedAdvantages,
    forced_entry_credit,
    informed_stratified_advantages,
    stratified_advantages,
)


def reference(
    rewards: list[float],
    keys: list[tuple[str, str]],
    history: list[list[tuple[tuple[str, str], float]]],
    *,
    window: int,
    alpha: float,
    beta: float,
    lam: float,
    scale: str,
    eps: float,
) -> list[float]:
    """The formulas of the docstring, one loop at a time."""
    s_win: dict[tuple[str, str], float] = defaultdict(float)
    n_win: dict[tuple[str, str], int] = defaultdict(int)
    for batch in history[-window:]:
        for k, r in batch:
            s_win[k] += r
            n_win[k] += 1
    prior = {k: (s_win[k] + alpha) / (n_win[k] + alpha + beta) for k in keys}
    members: dict[tuple[str, str], list[float]] = defaultdict(list)
    for k, r in zip(keys, rewards, strict=True):
        members[k].append(r)
    adv = []
    for k, r in zip(keys, rewards, strict=True):
        rs, p = members[k], prior[k]
        a = r - (sum(rs) - r + lam * p) / (len(rs) - 1 + lam)
        if scale == "family":
            m = (sum(rs) + lam * p) / (len(rs) + lam)
            sigma = math.sqrt((sum((x - m) ** 2 for x in rs) + lam * p * (1 - p)) / (len(rs) + lam))
            a = a / (sigma + eps)
        adv.append(a)
    if scale == "batch":
        mean = sum(adv) / len(adv)
        std = math.sqrt(sum((a - mean) ** 2 for a in adv) / len(adv))
        adv = [a / (std + eps) for a in adv]
    return adv


@pytest.mark.parametrize("scale", ["none", "family", "batch"])
@pytest.mark.parametrize("seed", range(4))
def test_matches_reference_over_batches(scale: str, seed: int) -> None:
    rng = random.Random(seed)
    window, alpha, beta, lam = 3, 1.0, 1.0, rng.choice([0.5, 1.0, 4.0])
    adv = StratifiedAdvantages(
        window_batches=window, alpha=alpha, beta=beta, prior_weight=lam, scale=scale
    )  # type: ignore[arg-type]
    history: list[list[tuple[tuple[str, str], float]]] = []
    for _ in range(6):
        n = rng.randint(1, 60)
        qs = [f"q{rng.randint(0, 4)}" for _ in range(n)]
        fs = [rng.choice(["25,-", "4,*", "3,+", "7,/"]) for _ in range(n)]
        rs = [float(rng.random() < 0.4) if rng.random() < 0.8 else rng.random() for _ in range(n)]
        got = adv(torch.tensor(rs), qs, fs).tolist()
        keys = list(zip(qs, fs, strict=True))
        want = reference(
            rs, keys, history, window=window, alpha=alpha, beta=beta, lam=lam, scale=scale, eps=1e-6
        )
        assert got == pytest.approx(want, rel=1e-5, abs=1e-5)
        history.append(list(zip(keys, rs, strict=True)))


def test_singleton_family_is_not_crushed_to_zero() -> None:
    rewards = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 0, 1])
    a = stratified_advantages(rewards, groups, torch.full((5,), 0.5), scale="family")
    assert a[4] > 0.5  # the lone success of a rare family keeps a positive signal
    assert torch.all(a[:4] > 0) and torch.all(a[:4] < a[4])


def test_batch_never_enters_its_own_prior() -> None:
    window = PriorWindow(window_batches=2)
    g = torch.tensor([7, 7, 9])
    assert window.prior(g).tolist() == [0.5, 0.5, 0.5]
    window.update(g, torch.tensor([1.0, 1.0, 0.0]))
    assert window.prior(g).tolist() == pytest.approx([3 / 4, 3 / 4, 1 / 3])
    window.update(torch.tensor([9]), torch.tensor([1.0]))
    window.update(torch.tensor([9]), torch.tensor([1.0]))  # the first batch leaves the window
    assert window.prior(g).tolist() == pytest.approx([1 / 2, 1 / 2, 3 / 4])


def test_bad_arguments_raise() -> None:
    r = torch.zeros(3)
    with pytest.raises(ValueError, match="1-D"):
        stratified_advantages(r, torch.zeros(2, dtype=torch.int64), torch.zeros(3))
    with pytest.raises(ValueError, match="prior_weight"):
        stratified_advantages(r, torch.zeros(3, dtype=torch.int64), r, prior_weight=0)
    with pytest.raises(ValueError, match="scale"):
        stratified_advantages(r, torch.zeros(3, dtype=torch.int64), r, scale="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        StratifiedAdvantages()(r, ["q"] * 3, ["f"] * 2)


def test_module_example_runs() -> None:
    import doctest

    import forkgate.advantages

    assert doctest.testmod(forkgate.advantages).failed == 0


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_v2_entry_credit_is_grpos_scaled_by_k_over_k_plus_1(k: int) -> None:
    """docs/stratified-advantages.md: Σ_{i∈f} A_i = k²/(k+1)·(m_f − V̂) with prior_weight 1."""
    rng = random.Random(k)
    fam = [float(rng.random() < 0.6) for _ in range(k)]
    other = [float(rng.random() < 0.3) for _ in range(6)]
    rewards = fam + other
    total, _ = informed_stratified_advantages(rewards, ["q"] * len(rewards), ["f"] * k + ["g"] * 6)
    v_hat = sum(rewards) / len(rewards)
    m_f = sum(fam) / k
    assert sum(total[:k]) == pytest.approx(k * k / (k + 1) * (m_f - v_hat), abs=1e-12)
    grpo = sum(r - v_hat for r in fam)
    assert sum(total[:k]) == pytest.approx(grpo * k / (k + 1), abs=1e-12)


def test_forced_entry_credit_by_hand() -> None:
    # q: 4 free rollouts (two in "a", mean 1/2), two forced into "b" (never entered freely, π 0.01),
    # one forced into "a" (entered freely: no credit).
    rewards = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    fams = ["a", "a", "c", "c", "b", "b", "a"]
    forced = [False] * 4 + [True] * 3
    probs = [0.5, 0.5, 0.2, 0.2, 0.01, 0.01, 0.5]
    adv, credit = forced_entry_credit(rewards, ["q"] * 7, fams, forced, probs)
    assert adv[:4] == pytest.approx([0.5, -0.5, 0.5, -0.5])
    assert adv[4:6] == pytest.approx([1.0, -1.0]) and adv[6] == 0.0
    # floor 1/G = 1/4 > π_b: w = 1/4; e = w · (G/m) · (1 − 1/2) = 1/4 · 2 · 1/2
    assert credit == pytest.approx([0, 0, 0, 0, 0.25, 0.0, 0.0])
    _, capped = forced_entry_credit(rewards, ["q"] * 7, fams, forced, probs, floor=0.0)
    assert capped[4] == pytest.approx(0.01 * 2 * 0.5)  # unclipped: the importance weight π_b
    with pytest.raises(ValueError):
        forced_entry_credit(rewards, ["q"] * 6, fams, forced, probs)
    with pytest.raises(ValueError):
        forced_entry_credit(rewards, ["q"] * 7, fams, forced, probs, floor=0.5, cap=0.1)


@pytest.mark.parametrize(("pi", "v_f", "m"), [(0.001, 0.3, 2), (0.02, 0.7, 3), (0.4, 0.5, 4)])
def test_forced_entry_credit_expected_gradient(pi: float, v_f: float, m: int) -> None:
    """E[Σ_j e_j] = G · clip(π_f, 1/G, 1) · V_f · (1 − V̂), exactly over the forced outcomes."""
    free = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]  # G = 8, V̂ = 1/4, family "b" never entered
    g, v_hat = len(free), sum(free) / len(free)
    expected = 0.0
    for outcome in itertools.product([0.0, 1.0], repeat=m):
        prob = math.prod(v_f if r else 1 - v_f for r in outcome)
        rewards = free + list(outcome)
        _, credit = forced_entry_credit(
            rewards, ["q"] * len(rewards), ["a"] * g + ["b"] * m,
            [False] * g + [True] * m, [0.9] * g + [pi] * m,
        )  # fmt: skip
        expected += prob * sum(credit)
    w = min(1.0, max(1 / g, pi))
    assert expected == pytest.approx(g * w * v_f * (1 - v_hat), abs=1e-12)
