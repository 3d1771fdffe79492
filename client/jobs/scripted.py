"""A scripted Countdown policy whose checkpoints differ in their routes and skill.

Example::

    with CertdClient(address) as client:
        policy = ScriptedModel.from_certd(client, {"band-3": tasks3, "band-4": tasks4})
    base = ScriptedCheckpoint("step-0", routes={"band-3": UNIFORM, "band-4": UNIFORM},
                            skill={"band-3": 0.3, "band-4": 0.4})
    responses = policy.sampler(base)("band-4", task, 8)   # 8 response texts

It stands in for a trained model where none can run (CPU-only tests, the support-guard
demo): every sample first picks a *route* — the operator written after the first operand,
the ``operator`` field of ``countdown.first-op.v1`` — from the checkpoint's route shares for
that task set, then, when the task has a certified-feasible family entered through that
route, writes one of its witnesses with probability ``skill`` and a wrong expression entered
the same way otherwise. Nothing here decides correctness: certd verifies every text. Because
support depends on which routes a task can be entered through, moving route mass to a route
that few tasks admit erodes support the way first-token routing does in the research note.
The witnesses come from certd's ``EnumerateFamilies``.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from certd.statements import task_digest
from certd.v1 import tasks_pb2

from ..client import CertdClient
from ..samplers import Sample
from ..tasks import TaskLike, as_task

__all__ = ["OPERATORS", "ScriptedCheckpoint", "ScriptedModel", "blend"]

OPERATORS = ("+", "-", "*", "/")


def blend(a: Mapping[str, float], b: Mapping[str, float], t: float) -> dict[str, float]:
    """``(1 - t) × a + t × b`` over the union of routes (t in [0, 1])."""
    return {r: (1 - t) * a.get(r, 0.0) + t * b.get(r, 0.0) for r in sorted(set(a) | set(b))}


@dataclass(frozen=True, slots=True)
class ScriptedCheckpoint:
    """One checkpoint of the scripted policy.

    Attributes:
        name: the checkpoint's name.
        routes: per task set, the share of samples entered through each operator.
        skill: per task set, the chance of completing correctly on a feasible route.
    """

    name: str
    routes: Mapping[str, Mapping[str, float]]
    skill: Mapping[str, float]

    @property
    def digest(self) -> str:
        """A SHA-256 standing in for the weights' digest (over the checkpoint's parameters)."""
        text = repr((self.name, sorted((k, sorted(v.items())) for k, v in self.routes.items()),
                     sorted(self.skill.items())))  # fmt: skip
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class ScriptedModel:
    """Per task digest: its numbers and its witnesses by entry operator.

    Args:
        numbers: task digest → the task's numbers.
        witnesses: task digest → operator → witnesses of families entered with it.
        seed: the sampling seed (the same checkpoint and task give the same samples).
    """

    numbers: dict[str, list[int]]
    witnesses: dict[str, dict[str, list[str]]]
    seed: int = 0
    _calls: dict[tuple[str, str, str], int] = field(default_factory=dict, repr=False)

    @classmethod
    def from_certd(
        cls, client: CertdClient, task_sets: Mapping[str, Iterable[TaskLike]], seed: int = 0
    ) -> ScriptedModel:
        """Enumerate every task's feasible families through certd.

        Raises:
            ForkgateError: a certd call failed.
        """
        numbers: dict[str, list[int]] = {}
        witnesses: dict[str, dict[str, list[str]]] = {}
        for tasks in task_sets.values():
            for t in tasks:
                task = as_task(t)
                d = task_digest(task)
                found = client.enumerate_families(task)
                by_op: dict[str, list[str]] = {}
                for fl in found.labels:
                    by_op.setdefault(fl.label.fields["operator"], []).append(fl.witness)
                numbers[d] = list(task.countdown.numbers)
                witnesses[d] = by_op
        return cls(numbers, witnesses, seed)

    def feasible_routes(self, task: tasks_pb2.Task) -> set[str]:
        """The operators through which the task can be entered and solved."""
        return set(self.witnesses.get(task_digest(task), {}))

    def generate(
        self, ckpt: ScriptedCheckpoint, task_set: str, task: tasks_pb2.Task, k: int
    ) -> list[Sample]:
        """k samples (text and first-token log-probabilities) of one task.

        Raises:
            KeyError: the checkpoint has no routes or skill for ``task_set``.
        """
        d = task_digest(task)
        routes = ckpt.routes[task_set]
        skill = ckpt.skill[task_set]
        key = (ckpt.name, task_set, d)
        call = self._calls.get(key, 0)
        self._calls[key] = call + 1
        rng = random.Random(f"{self.seed}/{ckpt.name}/{d}/{call}")
        ops = [r for r in routes if routes[r] > 0]
        weights = [routes[r] for r in ops]
        z = sum(weights)
        logprobs = {op: math.log(w / z) for op, w in zip(ops, weights, strict=True)}
        nums = self.numbers.get(d) or list(task.countdown.numbers)
        out = []
        for _ in range(k):
            op = rng.choices(ops, weights)[0]
            feasible = self.witnesses.get(d, {}).get(op, [])
            if feasible and rng.random() < skill:
                text = rng.choice(feasible)
            else:
                text = _wrong(nums, op, rng)
            out.append(Sample(f"<answer>{text}</answer>", first_token_logprobs=dict(logprobs)))
        return out

    def sampler(self, ckpt: ScriptedCheckpoint) -> _Bound:
        """The checkpoint as an ``EvaluationSampler`` (``(task set, task, k) -> texts``)."""
        return _Bound(self, ckpt)


@dataclass(frozen=True, slots=True)
class _Bound:
    policy: ScriptedModel
    ckpt: ScriptedCheckpoint

    def __call__(self, task_set: str, task: tasks_pb2.Task, k: int) -> Sequence[str]:
        return [s.text for s in self.policy.generate(self.ckpt, task_set, task, k)]


def _wrong(nums: Sequence[int], op: str, rng: random.Random) -> str:
    """An expression entered through ``op`` that is usually wrong (certd decides)."""
    pool = list(nums)
    rng.shuffle(pool)
    head = f"{pool[0]}{op}{pool[1]}"
    tail = "".join(f"{rng.choice('+-')}{n}" for n in pool[2:])
    return f"({head}){tail}" if tail else head
