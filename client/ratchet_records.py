"""The ratchet's input, parsed: fork-tree records and stratified groups as typed values, or a
``MALFORMED`` refusal in one line (no Python reprs).

Example:
    >>> try:
    ...     parse_tree({"families": []})
    ... except Refused as e:
    ...     print(e.reason.value, e.detail)
    MALFORMED record: missing field 'task'

The formats are described in ``forkgate.ratchet`` (a record) and ``Ratchet.admit_group`` (a
group); the decisions on them are the ratchet's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from certd.v1 import authority_pb2, tasks_pb2, verifier_pb2

from .ratchet_state import Reason, Refused, parse_proofs
from .tasks import as_task

__all__ = ["Family", "ProofMap", "Rollout", "parse_group", "parse_tree"]

ProofMap = dict[tuple[int, int], list[bytes]]


@dataclass
class Family:
    """One certified family of a record: its label, witness and feasibility certificate."""

    label: str
    witness: str
    certificate: authority_pb2.Certificate


@dataclass
class Rollout:
    """One rollout of a group: the response, its verdict and the receipt covering it, and the
    digest of the task it says it was verified against ("" when it does not say)."""

    response: str
    verdict: verifier_pb2.Verdict
    receipt: verifier_pb2.Receipt
    task_sha256: str


def _describe(error: Exception) -> str:
    """A one-line reason for a malformed record (no Python reprs: ``missing field 'task'``)."""
    if isinstance(error, KeyError):
        return f"missing field '{error.args[0]!s:.80}'"
    if isinstance(error, TypeError):
        return f"a field has the wrong type ({error!s:.160})"
    return f"{error!s:.200}"


def parse_tree(record: Mapping[str, Any]) -> tuple[tasks_pb2.Task, list[Family], ProofMap]:
    """A fork-tree record's task, families and attached consistency proofs.

    Raises:
        Refused: ``MALFORMED``, naming the field.
    """
    try:
        task = as_task(record["task"])
        attached = parse_proofs(record.get("consistency"))
        families = []
        for fam in record["families"]:
            cert = authority_pb2.Certificate()
            json_format.ParseDict(fam["certificate"], cert)
            families.append(Family(str(fam["label"]), str(fam["witness"]), cert))
    except (KeyError, TypeError, ValueError, json_format.ParseError) as e:
        raise Refused(Reason.MALFORMED, f"record: {_describe(e)}") from e
    return task, families, attached


def _rollouts(record: Mapping[str, Any]) -> list[Rollout]:
    rollouts = []
    receipts: dict[str, verifier_pb2.Receipt] = {}  # a batch's rollouts share one receipt
    for ro in record["rollouts"]:
        verdict = verifier_pb2.Verdict()
        json_format.ParseDict(ro["verdict"], verdict)
        text = json.dumps(ro["receipt"], sort_keys=True)
        receipt = receipts.get(text)
        if receipt is None:
            receipt = receipts[text] = verifier_pb2.Receipt()
            json_format.ParseDict(ro["receipt"], receipt)
        rollouts.append(
            Rollout(str(ro["response"]), verdict, receipt, str(ro.get("task_sha256", "")))
        )
    return rollouts


def parse_group(
    record: Mapping[str, Any],
) -> tuple[tasks_pb2.Task, str, list[Rollout], Family | None, ProofMap]:
    """A stratified group's task, family, rollouts, optional certified family and attached
    consistency proofs.

    Raises:
        Refused: ``MALFORMED``, naming the field, or a group without rollouts.
    """
    try:
        task = as_task(record["task"])
        attached = parse_proofs(record.get("consistency"))
        family = str(record["family"])
        rollouts = _rollouts(record)
        fam = None
        if record.get("certificate") is not None:
            cert = authority_pb2.Certificate()
            json_format.ParseDict(record["certificate"], cert)
            fam = Family(family, str(record["witness"]), cert)
    except (KeyError, TypeError, ValueError, json_format.ParseError) as e:
        raise Refused(Reason.MALFORMED, f"group: {_describe(e)}") from e
    if not rollouts:
        raise Refused(Reason.MALFORMED, "group has no rollouts")
    return task, family, rollouts, fam, attached
