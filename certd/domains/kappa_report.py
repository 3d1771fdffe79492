"""Determinacy of a κ: within- vs between-family variance of downstream success.

Example:
    >>> rows = [Rollout("t1", "a", 1.0), Rollout("t1", "a", 1.0), Rollout("t1", "b", 0.0),
    ...         Rollout("t1", "b", 0.0), Rollout("t1", "a", 1.0), Rollout("t1", "b", 1.0)]
    >>> r = determinacy(rows)
    >>> round(r.ratio, 3), round(r.baseline, 1), r.verdict
    (1.0, 3.0, 'decisive')

For each task, rollouts are grouped by their label under the κ. With ``s`` the success
(reward in 0..1) of a rollout, ``m_f`` the mean of family ``f`` and ``m_t`` the task's mean:

- within-family variance  W = Σ_t Σ_f Σ_{i∈f} (s_i − m_f)² / N
- between-family variance B = Σ_t Σ_f n_f (m_f − m_t)² / N

pooled over tasks (``N`` rollouts in all). The **ratio** is W / B. If labels were assigned at
random, B would be about W / n̄ (``n̄`` the mean family size), so the ratio would be about n̄:
that is the **baseline**. A κ is

- ``too fine`` when its families are mostly singletons (n̄ < 2, or more families than half
  the rollouts): variance within a family cannot be estimated and every split looks decisive;
- ``too coarse`` when the ratio is at least half the baseline (or B = 0 while W > 0): knowing
  the label removes little of the variance in success, so the families mix successes and
  failures;
- ``decisive`` otherwise; ``undetermined`` when success never varies (W = B = 0).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Determinacy", "Rollout", "determinacy", "rollouts_by_kappa"]


@dataclass(frozen=True, slots=True)
class Rollout:
    """One verified rollout: its task, its label under the κ, and its success in 0..1."""

    task: str
    label: str
    success: float


@dataclass(frozen=True, slots=True)
class Determinacy:
    """The report for one κ."""

    rollouts: int
    tasks: int
    families: int
    mean_family_size: float
    within: float
    between: float
    ratio: float
    baseline: float
    verdict: str

    def as_dict(self) -> dict[str, object]:
        """The report as JSON-ready values (an infinite ratio is ``null``)."""
        return {
            "rollouts": self.rollouts,
            "tasks": self.tasks,
            "families": self.families,
            "mean_family_size": round(self.mean_family_size, 6),
            "within_variance": round(self.within, 6),
            "between_variance": round(self.between, 6),
            "ratio": None if math.isinf(self.ratio) else round(self.ratio, 6),
            "random_label_baseline": round(self.baseline, 6),
            "verdict": self.verdict,
        }


def determinacy(rollouts: Iterable[Rollout]) -> Determinacy:
    """Within/between-family variance of success, pooled over tasks, and the verdict.

    Args:
        rollouts: verified rollouts labelled under one κ.

    Raises:
        ValueError: no rollouts, or a success outside 0..1.

    Returns:
        The report.
    """
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    n = 0
    for r in rollouts:
        if not 0.0 <= r.success <= 1.0 or math.isnan(r.success):
            raise ValueError(f"success must be in 0..1, got {r.success} (task {r.task})")
        groups[r.task][r.label].append(r.success)
        n += 1
    if n == 0:
        raise ValueError("no rollouts")
    within = between = 0.0
    families = 0
    for fams in groups.values():
        values = [s for ss in fams.values() for s in ss]
        task_mean = sum(values) / len(values)
        for ss in fams.values():
            m = sum(ss) / len(ss)
            within += sum((s - m) ** 2 for s in ss)
            between += len(ss) * (m - task_mean) ** 2
            families += 1
    within /= n
    between /= n
    size = n / families
    if between > 0:
        ratio = within / between
    else:
        ratio = math.inf if within > 0 else 0.0
    if size < 2 or families > n / 2:
        verdict = "too fine"
    elif within == 0 and between == 0:
        verdict = "undetermined"
    elif ratio >= size / 2:
        verdict = "too coarse"
    else:
        verdict = "decisive"
    return Determinacy(n, len(groups), families, size, within, between, ratio, size, verdict)


_SKIP = {"ERROR", "INFRA_ERROR", "STATUS_UNSPECIFIED"}


def _success(row: Mapping[str, Any], where: str) -> float:
    for key in ("success", "correct"):
        if key in row:
            value = row[key]
            if isinstance(value, bool):
                return 1.0 if value else 0.0
            if isinstance(value, int | float):
                return float(value)
            raise ValueError(f"{where}: {key}: expected a number or boolean, got {value!r}")
    status = row.get("status")
    if isinstance(status, str):
        return 1.0 if status == "CORRECT" else 0.0
    raise ValueError(f"{where}: needs success, correct or status")


def rollouts_by_kappa(
    rows: Iterable[Mapping[str, Any]], line_numbers: Sequence[int] = ()
) -> dict[str, list[Rollout]]:
    """Group JSONL rows into labelled rollouts, per κ.

    A row names its task (``task``, ``task_id`` or ``question``), its success (``success``
    in 0..1, ``correct`` true/false, or ``status`` where CORRECT is success) and its labels:
    ``labels`` ({κ: label}, as ``forkgate verify-batch`` writes) and/or ``kappa`` with
    ``family`` or ``label``. Rows whose status is ERROR or INFRA_ERROR are skipped: they
    were not verified.

    Args:
        rows: parsed JSON objects.
        line_numbers: each row's line in its file; messages then say ``line N``, not ``row N``.

    Raises:
        ValueError: a row without a task, a success or any label (the message names the row).

    Returns:
        κ name → its rollouts.
    """
    out: dict[str, list[Rollout]] = defaultdict(list)
    for n, row in enumerate(rows, 1):
        where = f"line {line_numbers[n - 1]}" if n <= len(line_numbers) else f"row {n}"
        if row.get("status") in _SKIP:
            continue
        task = row.get("task", row.get("task_id", row.get("question")))
        if task is None:
            raise ValueError(f"{where}: needs task, task_id or question")
        task_key = (
            task
            if isinstance(task, str)
            else repr(sorted(task.items()) if isinstance(task, dict) else task)
        )
        success = _success(row, where)
        labels: dict[str, str] = {}
        raw = row.get("labels") or {}
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where}: labels: expected an object, got {raw!r}")
        labels.update({str(k): str(v) for k, v in raw.items()})
        kappa = row.get("kappa")
        label = row.get("family", row.get("label"))
        if isinstance(kappa, str) and label is not None:
            labels[kappa] = str(label)
        if not labels:
            raise ValueError(f"{where}: needs labels, or kappa with family/label")
        for k, v in labels.items():
            out[k].append(Rollout(task_key, v, success))
    return dict(out)
