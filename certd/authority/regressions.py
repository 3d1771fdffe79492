"""Which falls refuse a checkpoint: the acceptance rules, as pure functions of the figures.

Example:
    >>> from certd.config import AcceptanceConfig
    >>> from certd.effective_support import Interval
    >>> spec = TaskSetSpec("band-4", k=8, tolerance_best_at_k=0.10)
    >>> change = Interval(-0.19, -0.30, -0.09, 0.95)
    >>> counts(change, AcceptanceConfig())   # the interval excludes 0: not sampling noise
    True

``compare`` attaches to each capability its change from the run's previous accepted
certificate (with a bootstrap interval seeded by the run, the sequence and the task set, so
the same samples against the same head give the same interval); ``find_drops`` names every
capability that fell past its tolerance from the previous certificate, or from the run's
first one (so small falls cannot add up unseen), and a target that did not improve.
``certd.authority.acceptances`` signs what these decide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from certd.authority.acceptance_records import AcceptanceDecision, Capability, Drop, TaskSetSpec
from certd.config import AcceptanceConfig
from certd.effective_support import Interval, SupportChange, support_change
from certd.payloads import sha256_hex

__all__ = ["compare", "counts", "find_drops"]


def _seed(text: str) -> int:
    return int(sha256_hex(text.encode())[:15], 16)


def _capability(decision: AcceptanceDecision, task_set: str) -> Capability | None:
    return next((c for c in decision.capabilities if c.task_set == task_set), None)


def counts(change: Interval, cfg: AcceptanceConfig) -> bool:
    """Whether a fall counts: outside sampling noise, or every fall when so configured."""
    return cfg.refuse_within_noise or not change.within_noise


def compare(cap: Capability, head: AcceptanceDecision | None, cfg: AcceptanceConfig) -> Capability:
    """``cap`` with its change from the run's head (unchanged when there is nothing to compare)."""
    before = _capability(head, cap.task_set) if head is not None else None
    if head is None or before is None:
        return cap
    change = support_change(
        before.outcomes,
        cap.outcomes,
        cap.figures.k,
        resamples=cfg.bootstrap_resamples,
        level=cfg.interval_level,
        seed=_seed(f"{head.run}/{head.sequence}/{cap.task_set}"),
    )
    return Capability(cap.task_set, cap.figures, cap.outcomes, change)


def _falls(
    spec: TaskSetSpec,
    before: Capability,
    cap: Capability,
    change: SupportChange,
    against: str,
    cfg: AcceptanceConfig,
) -> list[Drop]:
    """best@k and pass@1 falls of ``cap`` from ``before`` past their tolerances."""
    out = []
    for metric, tolerance, interval in (
        ("best_at_k", spec.tolerance_best_at_k, change.best_at_k),
        ("pass_at_1", spec.tolerance_pass_at_1, change.pass_at_1),
    ):
        was, now = getattr(before.figures, metric), getattr(cap.figures, metric)
        if was - now > tolerance and counts(interval, cfg):
            out.append(Drop(cap.task_set, metric, was, now, tolerance, interval, against))
    return out


def _from_baseline(
    run: str,
    spec: TaskSetSpec,
    cap: Capability,
    first: Capability | None,
    cfg: AcceptanceConfig,
) -> list[Drop]:
    """Falls of ``cap`` from the run's first certificate (same k only)."""
    if first is None or first.figures.k != cap.figures.k:
        return []
    change = support_change(
        first.outcomes,
        cap.outcomes,
        cap.figures.k,
        resamples=cfg.bootstrap_resamples,
        level=cfg.interval_level,
        seed=_seed(f"{run}/0/{cap.task_set}"),
    )
    return _falls(spec, first, cap, change, "baseline", cfg)


def find_drops(
    run: str,
    target: str,
    caps: Sequence[Capability],
    head: AcceptanceDecision | None,
    baseline: AcceptanceDecision | None,
    specs: Mapping[str, TaskSetSpec],
    cfg: AcceptanceConfig,
) -> list[Drop]:
    """Every reason to refuse: falls past tolerance, and a target that did not improve.

    Args:
        run: the run.
        target: the task set that must improve.
        caps: this evaluation's capabilities, compared with ``head`` (``compare``).
        head: the run's latest accepted certificate (None: this is the run's baseline).
        baseline: the run's first accepted certificate.
        specs: the registered task sets' declarations, by name.
        cfg: the acceptance settings.

    Returns:
        The drops, empty when the checkpoint is accepted.
    """
    if head is None:
        return []  # the run's baseline
    drops: list[Drop] = []
    for cap in caps:
        spec = specs[cap.task_set]
        before = _capability(head, cap.task_set)
        if before is None or cap.change is None:
            continue  # registered after the previous certificate: nothing to keep
        if cap.task_set == target:
            gain = cap.figures.pass_at_1 - before.figures.pass_at_1
            if gain <= spec.min_improvement:
                drops.append(
                    Drop(
                        cap.task_set,
                        "target_pass_at_1",
                        before.figures.pass_at_1,
                        cap.figures.pass_at_1,
                        spec.min_improvement,
                        cap.change.pass_at_1,
                    )
                )
            continue
        drops.extend(_falls(spec, before, cap, cap.change, "previous", cfg))
        other = baseline is not None and baseline is not head
        first = _capability(baseline, cap.task_set) if other and baseline is not None else None
        seen = {(d.task_set, d.metric) for d in drops}
        drops.extend(
            d
            for d in _from_baseline(run, spec, cap, first, cfg)
            if (d.task_set, d.metric) not in seen
        )
    return drops
