"""The experiment's arms: what each changes in the GRPO loop (advantages, mask, extra losses).

An arm is named by a spec string: a base name from ``ARMS``, optionally ``@weight`` for the
arms with a weight knob (``grpo+kl@0.3``, ``grpo+replay@0.5``), so a Pareto sweep over the
weight is a list of arms. For ``kl-cov`` and ``clip-cov`` the knob is the share of scored tokens
they select (``kl-cov@0.05``; bare: ``ExperimentOptions.cov_ratio``), and an optional second
knob after a slash: KL-Cov's coefficient (``kl-cov@1/10``: every token, coefficient 10) or
Clip-Cov's lower covariance bound (``clip-cov@1/0.25``: every token whose covariance lies in
(0.25, high)). Past a share of 1 the share no longer binds, so the second knob is how a sweep
reaches an entropy budget; such a sweep is what ``matched`` interpolates.

Example:
    >>> parse_arm("kl-cov@1/10").kl_cov_coef
    10.0
    >>> from forkgate.jobs.experiment.options import ExperimentOptions
    >>> cov_knobs(parse_arm("clip-cov@1/0.25"), ExperimentOptions())
    (1.0, 1.0, (0.25, 5.0))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .options import ExperimentOptions

__all__ = [
    "ARMS",
    "ArmSpec",
    "cov_knobs",
    "parse_arm",
]

Advantage = Literal["grpo", "v2", "fec", "shuffled"]
Replay = Literal["none", "balanced", "unbalanced"]
Loss = Literal["pg", "kl-cov", "clip-cov"]


@dataclass(frozen=True)
class ArmSpec:
    """One arm's settings.

    Attributes:
        name: the spec string.
        advantage: ``grpo`` (per-question normalisation), ``v2`` (informed stratified
            advantages), ``fec`` (GRPO plus forced-entry credit, ``forced_entry_credit``) or
            ``shuffled`` (GRPO on rewards permuted over the batch: the null).
        unscored_entry: leave the free rollouts' entry tokens out of the loss.
        replay: fork-tree replay each step (balanced over certified families, or the
            unbalanced control of the same size).
        replay_weight: the replay NLL's weight in the loss.
        kl_weight: the entry-distribution KL's weight (0: none).
        coverage_m: certified families forced into each RL group (fork coverage; 0: none).
        sft: fork-tree SFT before RL.
        loss: ``pg`` (clipped policy gradient), ``kl-cov`` or ``clip-cov`` (Cui et al. 2025).
        cov_ratio: the share of tokens KL-Cov / Clip-Cov select (None: the options' value).
        kl_cov_coef: KL-Cov's coefficient (None: the options' value).
        clip_cov_lb: Clip-Cov's lower covariance bound (None: the options' value).
    """

    name: str
    advantage: Advantage = "grpo"
    unscored_entry: bool = False
    replay: Replay = "none"
    replay_weight: float = 0.0
    kl_weight: float = 0.0
    coverage_m: int = 0
    sft: bool = False
    loss: Loss = "pg"
    cov_ratio: float | None = None
    kl_cov_coef: float | None = None
    clip_cov_lb: float | None = None

    @property
    def needs_forktrees(self) -> bool:
        """Whether the arm uses the certified fork trees."""
        return self.replay == "balanced" or self.sft or self.coverage_m > 0


_BASE: dict[str, ArmSpec] = {
    s.name: s
    for s in (
        ArmSpec("grpo"),
        ArmSpec("grpo-unscored", unscored_entry=True),
        ArmSpec("grpo+replay", replay="balanced", replay_weight=0.5),
        ArmSpec("grpo+unbal-replay", replay="unbalanced", replay_weight=0.5),
        ArmSpec("grpo+kl", kl_weight=0.3),
        ArmSpec("strat-v2", advantage="v2", coverage_m=2),
        ArmSpec("grpo+fec", advantage="fec", coverage_m=2),
        ArmSpec(
            "strat-v2+replay", advantage="v2", coverage_m=2, replay="balanced", replay_weight=0.5
        ),
        ArmSpec("sft+grpo", sft=True),
        ArmSpec("kl-cov", loss="kl-cov"),
        ArmSpec("clip-cov", loss="clip-cov"),
        ArmSpec("shuffled", advantage="shuffled"),
    )
}
ARMS = tuple(_BASE)


def _number(spec: str, text: str, what: str) -> float:
    try:
        x = float(text)
    except ValueError as e:
        raise ValueError(f"arm {spec!r}: {what} {text!r} is not a number") from e
    if not math.isfinite(x):  # nan passes every comparison below, inf poisons the loss
        raise ValueError(f"arm {spec!r}: {what} {text!r} is not a finite number")
    return x


def parse_arm(spec: str) -> ArmSpec:
    """The arm of a spec string (``name``, ``name@weight``, or ``name@share/knob`` for the
    token-level arms).

    Raises:
        ValueError: unknown name, a weight on an arm without a knob, or a bad weight.
    """
    name, _, weight = spec.partition("@")
    if name not in _BASE:
        raise ValueError(f"unknown arm {name!r}; expected one of {', '.join(ARMS)}")
    arm = replace(_BASE[name], name=spec)
    if not weight:
        return arm
    weight, slash, second = weight.partition("/")
    if slash and arm.loss == "pg":
        raise ValueError(f"arm {spec!r}: only kl-cov and clip-cov take a second knob")
    w = _number(spec, weight, "weight")
    if w < 0:
        raise ValueError(f"arm {spec!r}: weight must be >= 0")
    if arm.kl_weight:
        return replace(arm, kl_weight=w)
    if arm.replay != "none":
        return replace(arm, replay_weight=w)
    if arm.loss == "pg":
        raise ValueError(f"arm {name!r} has no weight knob")
    if not 0 < w <= 1:
        raise ValueError(f"arm {spec!r}: the selected share must be in (0, 1]")
    arm = replace(arm, cov_ratio=w)
    if not slash:
        return arm
    k = _number(spec, second, "second knob")
    if arm.loss == "kl-cov":
        if not k > 0:
            raise ValueError(f"arm {spec!r}: the KL-Cov coefficient must be > 0")
        return replace(arm, kl_cov_coef=k)
    return replace(arm, clip_cov_lb=k)


def cov_knobs(arm: ArmSpec, opts: ExperimentOptions) -> tuple[float, float, tuple[float, float]]:
    """(selected share, KL-Cov coefficient, Clip-Cov window) of ``arm`` under ``opts``."""
    ratio = opts.cov_ratio if arm.cov_ratio is None else arm.cov_ratio
    coef = opts.kl_cov_coef if arm.kl_cov_coef is None else arm.kl_cov_coef
    lo, hi = opts.clip_cov_bounds
    return ratio, coef, (lo if arm.clip_cov_lb is None else arm.clip_cov_lb, hi)
