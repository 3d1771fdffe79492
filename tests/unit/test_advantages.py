"""Stratified advantages: the vectorised torch code against a plain-Python reference."""

from __future__ import annotations

import math
import random
from collections import defaultdict

import pytest
import torch

from forkgate.advantages import PriorWindow, StratifiedAdvantages, stratified_advantages


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
