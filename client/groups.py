"""Stratified group records: one task's verified rollouts, one record per entry family.

Example::

    pairs = client.verify_batch_receipted([(task, r) for r in responses])
    rollouts = [(r, v, rc) for r, (v, rc) in zip(responses, pairs)]
    for group in group_records(task, rollouts):
        ratchet.admit(group)          # see forkgate.ratchet: each receipt checked offline

A group is ``{"task", "family", "rollouts": [{"response", "verdict", "receipt",
"task_sha256"}]}`` (verdict and receipt as protobuf JSON), with ``certificate`` and ``witness``
when the family's feasibility certificate is given. Rollouts whose verdict is INFRA_ERROR carry
no reward and are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import json_format

from certd.statements import task_digest, task_json
from certd.v1 import authority_pb2, tasks_pb2, verifier_pb2

from .tasks import TaskLike, as_task

__all__ = ["Rollout", "group_records"]

Rollout = tuple[str, verifier_pb2.Verdict, verifier_pb2.Receipt]


def group_records(
    task: TaskLike,
    rollouts: Sequence[Rollout],
    *,
    certificates: Mapping[str, authority_pb2.Certificate] | None = None,
) -> list[dict[str, Any]]:
    """One stratified group record per family among ``rollouts``, in first-seen order.

    Args:
        task: the task every rollout was verified against.
        rollouts: (response, verdict, receipt) triples, as ``verify_batch_receipted`` gives.
        certificates: feasibility certificates by family label (their ``witness`` is kept).

    Returns:
        Group records, ready for ``Ratchet.admit``.
    """
    pb = as_task(task)
    digest = task_digest(pb)
    groups: dict[str, list[dict[str, Any]]] = {}
    receipts: dict[bytes, dict[str, Any]] = {}  # one JSON object per receipt, shared
    for response, verdict, receipt in rollouts:
        if verdict.status == tasks_pb2.INFRA_ERROR:
            continue
        family = verdict.family.value if verdict.HasField("family") else ""
        key = receipt.SerializeToString(deterministic=True)
        if key not in receipts:
            receipts[key] = json_format.MessageToDict(receipt)
        groups.setdefault(family, []).append(
            {
                "response": response,
                "verdict": json_format.MessageToDict(verdict),
                "receipt": receipts[key],
                "task_sha256": digest,
            }
        )
    out = []
    for family, members in groups.items():
        record: dict[str, Any] = {"task": task_json(pb), "family": family, "rollouts": members}
        cert = (certificates or {}).get(family)
        if cert is not None:
            record["certificate"] = json_format.MessageToDict(cert)
            record["witness"] = cert.witness
        out.append(record)
    return out
