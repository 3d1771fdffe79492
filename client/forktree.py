"""The fork-tree builder: per task, one certified witness for each of m entry families.

Example::

    builder = ForkTreeBuilder(client, sampler, m=4, budget=64, round_size=8)
    builder.run(tasks, Path("forktrees.jsonl"))      # resumable; one JSON line per task

For each task it samples in rounds, verifies every sample through certd, groups the correct
ones by κ label, and certifies each new family with its first verified witness (a pseudo-fork
refusal just means the family is not new). It stops when m families are certified or the
sample budget is spent. For Countdown, certd enumerates the feasible families: the record
lists the uncovered ones, and with ``force_prefix`` the builder spends the remaining budget
forcing each uncovered family's entry prefix (``prefix_template``) so the policy completes
entries it no longer initiates.

A record (what ``Ratchet.admit`` takes)::

    {"task": {...}, "task_digest": "...", "families": [{"label", "witness", "certificate",
     "forced": bool}], "feasible": 4, "uncovered": ["3,-"], "negatives": [{"text", "status",
     "family"}], "samples": 40, "tokens": 1234, "complete": true,
     "consistency": [{"first", "second", "hashes"}]}

``consistency`` links the record's checkpoints to the previous record's (``link_record``), so
``forkgate admit`` admits the file offline, without ``--server``.

Records are appended with a flush and fsync per task; a rerun skips tasks already written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from certd.statements import task_digest
from certd.v1 import tasks_pb2

from .client import CertdClient
from .errors import CertificationRefusedError
from .progress import Progress
from .ratchet_state import proofs_json
from .samplers import Sample, Sampler
from .tasks import as_task

__all__ = ["ForkTreeBuilder", "countdown_prompt", "done_task_digests", "link_record"]


def countdown_prompt(task: Mapping[str, Any]) -> str:
    """The TinyZero-style Countdown prompt of a task object (or a puzzle's flat form)."""
    inner = task.get("task")
    if isinstance(inner, Mapping):
        task = inner
    return (
        f"Using the numbers {list(task['numbers'])}, create an equation that equals "
        f"{task['target']}. You can use basic arithmetic operations (+, -, *, /) and each "
        "number can only be used once. Show your work in <think> </think> tags. And return "
        "the final answer in <answer> </answer> tags, for example <answer> (1 + 2) / 3 "
        "</answer>.\n"
    )


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line a crash left half-written, so appended records stay valid JSONL."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def done_task_digests(path: Path) -> set[str]:
    """Task digests already written to an output file (a torn last line is ignored)."""
    return _scan(path)[0]


def _scan(path: Path) -> tuple[set[str], int | None]:
    """(task digests written, the anchor size of the last record with one)."""
    done: set[str] = set()
    anchor = None
    if not path.exists():
        return done, anchor
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
                done.add(str(record["task_digest"]))
            except (ValueError, KeyError, TypeError):
                continue
            sizes = _tree_sizes(record)
            anchor = max(sizes) if sizes else anchor
    return done, anchor


def _tree_sizes(record: Mapping[str, Any]) -> set[int]:
    """The tree sizes of the checkpoints the record's certificates are proven under."""
    try:
        return {int(f["certificate"]["inclusion"]["treeSize"]) for f in record.get("families", [])}
    except (KeyError, TypeError, ValueError):
        return set()


def link_record(
    record: dict[str, Any],
    previous: int | None,
    consistency: Callable[[int, int], Sequence[bytes]],
) -> int | None:
    """Attach the consistency proofs that let the ratchet admit ``record`` offline.

    The record's checkpoints and the previous record's anchor (its largest checkpoint) are
    linked to the largest of them all, R: a proof ``s → R`` for every other size ``s``
    (``consistency`` fetches it, e.g. ``client.consistency_proof``). A ratchet that trusts
    the previous record's anchor can then move to this one, and one that trusts an older
    state prefix sees each checkpoint proven. Stored as ``record["consistency"]``
    (``forkgate.ratchet_state.proofs_json``).

    Returns:
        The record's anchor (its largest tree size), or ``previous`` when it has none.
    """
    sizes = _tree_sizes(record)
    if not sizes:
        return previous
    linked = sizes | ({previous} if previous else set())
    top = max(linked)
    proofs = {(s, top): list(consistency(s, top)) for s in sorted(linked - {top})}
    record["consistency"] = proofs_json(proofs)
    return max(sizes)


@dataclass
class ForkTreeBuilder:
    """Builds certified fork trees with a sampler and a running certd.

    Args:
        client: a certd client.
        sampler: the policy.
        m: families wanted per task.
        budget: samples per task at most (forced-prefix samples included).
        round_size: samples drawn per round.
        max_tokens: generation length.
        temperature: sampling temperature.
        force_prefix: spend leftover budget forcing uncovered families' prefixes.
        forced_share: with ``force_prefix``, the share of the budget kept for forcing (free
            sampling stops at the rest).
        prefix_template: the forced entry, formatted with ``operand`` and ``operator``.
        prompt: task JSON → prompt text.
        keep_negatives: how many failed samples to keep per task.
        seed: base seed (each round gets its own).
    """

    client: CertdClient
    sampler: Sampler
    m: int = 4
    budget: int = 64
    round_size: int = 8
    max_tokens: int = 256
    temperature: float = 1.0
    force_prefix: bool = False
    forced_share: float = 0.5
    prefix_template: str = "<answer>{operand}{operator}"
    prompt: Callable[[Mapping[str, Any]], str] = countdown_prompt
    keep_negatives: int = 8
    seed: int = 0
    _progress: Any = field(default=None, init=False, repr=False)

    def run(self, tasks: Iterable[Mapping[str, Any]], out: Path) -> list[dict[str, Any]]:
        """Build a record per task not already in ``out``; append each durably."""
        pending = list(tasks)
        _drop_torn_tail(out)
        done, anchor = _scan(out)
        todo = [t for t in pending if task_digest(as_task(t)) not in done]
        records = []
        with (
            out.open("a", encoding="utf-8") as sink,
            Progress("fork trees", unit="tasks", total=len(todo)) as bar,
        ):
            self._progress = bar
            for task in todo:
                record = self.build(task)
                anchor = link_record(
                    record, anchor, lambda a, b: self.client.consistency_proof(a, b).hashes
                )
                sink.write(json.dumps(record, sort_keys=True) + "\n")
                sink.flush()
                os.fsync(sink.fileno())
                records.append(record)
                bar.update(1)
        return records

    def build(self, task: Mapping[str, Any]) -> dict[str, Any]:
        """Sample, verify and certify until m families or the budget; return the record."""
        pb = as_task(task)
        enum = self.client.enumerate_families(task) if pb.HasField("countdown") else None
        feasible = [lw.label for lw in enum.labels] if enum is not None else []
        state = _TaskState(task=dict(task), pb=pb)
        prompt = self.prompt(task)
        free = self.budget
        if self.force_prefix and enum is not None:
            free = self.budget - int(self.budget * self.forced_share)
        while state.samples < free and len(state.families) < self.m:
            self._round(state, prompt, free, None)
        if self.force_prefix and enum is not None:
            for label in feasible:
                if len(state.families) >= self.m or state.samples >= self.budget:
                    break
                if label.value not in state.families:
                    prefix = self.prefix_template.format(
                        operand=label.fields["operand"], operator=label.fields["operator"]
                    )
                    self._round(state, prompt, self.budget, prefix)
        labels = {lw.label.value for lw in enum.labels} if enum is not None else set()
        return {
            "task": state.task,
            "task_digest": task_digest(pb),
            "families": state.families_out(),
            "feasible": len(enum.families) if enum is not None else None,
            "feasible_labels": len(labels) if enum is not None else None,
            "uncovered": sorted(labels - set(state.families)) if enum is not None else None,
            "negatives": state.negatives[: self.keep_negatives],
            "pseudo_forks": state.pseudo_forks,
            "samples": state.samples,
            "tokens": state.tokens,
            "complete": len(state.families) >= self.m,
        }

    def _round(self, state: _TaskState, prompt: str, limit: int, prefix: str | None) -> None:
        """Draw one round (up to ``limit`` samples in all), with an optional forced prefix."""
        [group] = self.sampler.sample(
            [prompt],
            n=min(self.round_size, limit - state.samples),
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            seed=self.seed + state.rounds,
            prefix=prefix,
        )
        state.rounds += 1
        self._absorb(state, group, forced=prefix is not None)

    def _absorb(self, state: _TaskState, group: Sequence[Sample], *, forced: bool) -> None:
        state.samples += len(group)
        state.tokens += sum(len(s.token_ids) for s in group)
        verdicts = self.client.verify_batch_pb([(state.pb, s.text) for s in group])
        for sample, verdict in zip(group, verdicts, strict=True):
            label = verdict.family.value
            if verdict.status != tasks_pb2.CORRECT:
                state.negatives.append(
                    {
                        "text": sample.text[:2000],
                        "status": tasks_pb2.VerdictStatus.Name(verdict.status),
                        "family": label or None,
                    }
                )
                continue
            if label in state.families:
                continue
            try:
                cert = self.client.certify(state.pb, label, verdict.answer)
            except CertificationRefusedError as e:
                if e.reason != "PSEUDO_FORK":
                    raise
                state.pseudo_forks += 1  # the same solution as a certified family: not new
                continue
            state.families[label] = {
                "label": label,
                "witness": verdict.answer,
                "certificate": json_format.MessageToDict(cert),
                "forced": forced,
            }
            if self._progress is not None:
                self._progress.set_postfix(
                    families=len(state.families), budget_left=self.budget - state.samples
                )


@dataclass
class _TaskState:
    task: dict[str, Any]
    pb: tasks_pb2.Task
    samples: int = 0
    tokens: int = 0
    rounds: int = 0
    families: dict[str, dict[str, Any]] = field(default_factory=dict)
    pseudo_forks: int = 0
    negatives: list[dict[str, Any]] = field(default_factory=list)

    def families_out(self) -> list[dict[str, Any]]:
        return [self.families[k] for k in sorted(self.families)]
