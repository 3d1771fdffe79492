"""Certified datasets: records filtered through a ratchet, and their flat training rows.

Example::

    data = CertifiedDataset.from_jsonl(Path("forktrees.jsonl"), ratchet)
    for record in data: ...
    data.refused   # [(record index, Admission), ...]; data.line_numbers[index] in the file
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format

from certd.statements import task_digest
from certd.v1 import tasks_pb2, verifier_pb2

from .ratchet_records import loads_record
from .tasks import as_task

if TYPE_CHECKING:
    from .ratchet import Admission, Ratchet

__all__ = ["CertifiedDataset"]


@dataclass
class CertifiedDataset:
    """Fork-tree records and stratified groups filtered through a ratchet.

    Iterating yields only the admitted records.

    Example::

        data = CertifiedDataset.from_jsonl(Path("forktrees.jsonl"), ratchet)
        for record in data: ...
        data.refused   # [(record index, Admission), ...]; data.line_numbers[index] in the file
    """

    records: Iterable[Mapping[str, Any]]
    ratchet: Ratchet
    refused: list[tuple[int, Admission]] = field(default_factory=list)
    #: the file line number (1-based, blank lines counted) of each record read so far, by
    #: record index (``refused`` holds indices); empty unless read by ``from_jsonl``.
    line_numbers: list[int] = field(default_factory=list)

    @classmethod
    def from_jsonl(cls, path: Path, ratchet: Ratchet) -> CertifiedDataset:
        """Records from a JSONL file (one record a line)."""

        numbers: list[int] = []

        def lines() -> Iterator[Mapping[str, Any]]:
            with path.open(encoding="utf-8") as f:
                for line_no, line in enumerate(f, 1):
                    if line.strip():
                        numbers.append(line_no)
                        yield loads_record(line)

        return cls(lines(), ratchet, line_numbers=numbers)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        for n, record in enumerate(self.records):
            admission = self.ratchet.admit(record)
            if admission.admitted:
                yield record
            else:
                self.refused.append((n, admission))

    def rows(self) -> Iterator[dict[str, Any]]:
        """Flat rows of the admitted records: the training-side view.

        One row per family of a fork-tree record (``kind`` ``"witness"``, reward 1.0, status
        ``CORRECT``) and one per rollout of a stratified group (``kind`` ``"rollout"``, the
        verdict's reward and status). Columns: ``kind``, ``task_digest``, ``task`` (JSON),
        ``label``, ``witness`` (the witness or the rollout's response), ``reward``,
        ``status``, ``forced``, ``certificate`` (the feasibility certificate's protobuf JSON
        as a string, "" for a group without one), ``receipt`` and ``verdict`` (protobuf JSON
        strings for rollouts, "" for witnesses), so the schema is fixed.
        """
        for record in self:
            task = json.dumps(record["task"], sort_keys=True)
            digest = task_digest(as_task(record["task"]))
            if "rollouts" in record:
                cert = record.get("certificate")
                for ro in record["rollouts"]:
                    verdict = verifier_pb2.Verdict()
                    json_format.ParseDict(ro["verdict"], verdict)
                    yield {
                        "kind": "rollout",
                        "task_digest": digest,
                        "task": task,
                        "label": str(record["family"]),
                        "witness": str(ro["response"]),
                        "reward": float(verdict.reward),
                        "status": tasks_pb2.VerdictStatus.Name(verdict.status),
                        "forced": False,
                        "certificate": json.dumps(cert, sort_keys=True) if cert else "",
                        "receipt": json.dumps(ro["receipt"], sort_keys=True),
                        "verdict": json.dumps(ro["verdict"], sort_keys=True),
                    }
                continue
            for fam in record["families"]:
                yield {
                    "kind": "witness",
                    "task_digest": digest,
                    "task": task,
                    "label": str(fam["label"]),
                    "witness": str(fam["witness"]),
                    "reward": 1.0,
                    "status": "CORRECT",
                    "forced": bool(fam.get("forced", False)),
                    "certificate": json.dumps(fam["certificate"], sort_keys=True),
                    "receipt": "",
                    "verdict": "",
                }

    def to_hf(self) -> Any:
        """The admitted rows as a Hugging Face ``datasets.Dataset`` (needs ``datasets``).

        Raises:
            ImportError: ``datasets`` is not installed (it comes with the ``train`` extra).
        """
        import datasets

        return datasets.Dataset.from_list(list(self.rows()))
