"""Replay of certified fork trees, and fork coverage inside RL groups.

Example:
    >>> records = [{"task": {"numbers": [3, 4], "target": 7}, "families": [
    ...     {"label": "3,+", "witness": "3+4"}, {"label": "4,+", "witness": "4+3"}]}]
    >>> replay = FamilyReplay(records, seed=0)
    >>> [item.family for item in replay.sample(4)].count("3,+")
    2
    >>> [p.family for p in coverage_plan(records[0], group_size=8, m=1, per_family=2, seed=1)]
    ['4,+']

* ``FamilyReplay`` samples (task, witness) pairs from *ratchet-admitted* fork-tree records.
  ``balanced=True`` gives every certified family the same weight (the seed's family-balanced
  replay: a family the policy rarely enters is replayed as often as its favourite);
  ``balanced=False`` is the control — the same number of examples drawn from a pool of
  verified-correct samples with the frequencies they came with (unstratified diversity).
  Draws cycle through shuffled epochs, so every item is seen once before any repeats.
* ``coverage_plan`` splits an RL group of ``group_size`` rollouts into free rollouts and
  ``m`` certified families × ``per_family`` forced rollouts (the forced prefix is the
  family's entry; a trainer leaves it unscored). Families come from one admitted record; a
  record with fewer certified families gets fewer forced rollouts and more free ones, so the
  group's size (the rollout budget) never changes.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CoveragePlan", "FamilyReplay", "ReplayItem", "coverage_plan"]


@dataclass(frozen=True, slots=True)
class ReplayItem:
    """One replayed example: the task, its family label and the verified witness."""

    task: Mapping[str, Any]
    family: str
    witness: str


class FamilyReplay:
    """A sampler over certified families (balanced) or over a natural pool (control).

    Args:
        records: fork-tree records (``{"task", "families": [{"label", "witness"}]}``) the
            ratchet admitted, or, with ``balanced=False``, any such records where a family may
            repeat (one entry per verified sample: its frequency is its weight).
        balanced: each distinct (task, family) once per epoch (True), or each entry as given.
        seed: the shuffle seed.

    Raises:
        ValueError: there is nothing to replay.
    """

    def __init__(
        self, records: Sequence[Mapping[str, Any]], *, balanced: bool = True, seed: int = 0
    ) -> None:
        items: list[ReplayItem] = []
        seen: set[tuple[str, str]] = set()
        for rec in records:
            task = rec["task"]
            key_task = repr(sorted(task.items())) if isinstance(task, Mapping) else repr(task)
            for fam in rec.get("families", []):
                label, witness = str(fam["label"]), str(fam["witness"])
                if balanced:
                    if (key_task, label) in seen:
                        continue
                    seen.add((key_task, label))
                items.append(ReplayItem(task, label, witness))
        if not items:
            raise ValueError("no certified families to replay")
        self.items = items
        self.balanced = balanced
        self._rng = random.Random(seed)
        self._order: list[int] = []

    def __len__(self) -> int:
        return len(self.items)

    def sample(self, n: int) -> list[ReplayItem]:
        """The next ``n`` items (shuffled epochs; n may exceed the pool)."""
        out = []
        for _ in range(max(0, n)):
            if not self._order:
                self._order = list(range(len(self.items)))
                self._rng.shuffle(self._order)
            out.append(self.items[self._order.pop()])
        return out


@dataclass(frozen=True, slots=True)
class CoveragePlan:
    """``n`` rollouts forced into ``family`` (``""`` and no prefix: free rollouts)."""

    family: str
    n: int


def coverage_plan(
    record: Mapping[str, Any] | None,
    *,
    group_size: int,
    m: int,
    per_family: int,
    seed: int,
    exclude: Sequence[str] = (),
) -> list[CoveragePlan]:
    """The forced part of one RL group: up to ``m`` certified families × ``per_family``.

    The free rollouts are ``group_size − sum(p.n for p in plan)`` (at least one is always
    left free). Families in ``exclude`` (e.g. the policy's favourite) are skipped.

    Raises:
        ValueError: negative sizes, or ``group_size < 1``.
    """
    if group_size < 1 or m < 0 or per_family < 0:
        raise ValueError(f"bad sizes: group_size={group_size}, m={m}, per_family={per_family}")
    if record is None or m == 0 or per_family == 0:
        return []
    labels = sorted({str(f["label"]) for f in record.get("families", [])} - set(exclude))
    random.Random(seed).shuffle(labels)
    room = (group_size - 1) // per_family
    return [CoveragePlan(label, per_family) for label in labels[: min(m, room)]]
