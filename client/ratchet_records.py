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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from certd.signing.dsse import Envelope
from certd.statements import FeasibilityClaim, task_digest, task_json
from certd.v1 import authority_pb2, tasks_pb2, verifier_pb2

from .ratchet_state import Reason, Refused, parse_proofs, proofs_json
from .tasks import as_task

__all__ = [
    "Family",
    "ProofMap",
    "Rollout",
    "UnreadableRecord",
    "loads_record",
    "parse_group",
    "parse_tree",
    "record_copies",
    "reemit",
    "signed_feasible",
]

ProofMap = dict[tuple[int, int], list[bytes]]

TREE_FIELDS = frozenset(
    {
        "complete",
        "consistency",
        "families",
        "feasible",
        "feasible_labels",
        "negatives",
        "pseudo_forks",
        "samples",
        "task",
        "task_digest",
        "tokens",
        "uncovered",
    }
)
"""The fields of a fork-tree record (``ForkTreeBuilder.build``); any other is refused."""
FAMILY_FIELDS = frozenset({"certificate", "forced", "label", "witness"})
GROUP_FIELDS = frozenset({"certificate", "consistency", "family", "rollouts", "task", "witness"})
ROLLOUT_FIELDS = frozenset({"receipt", "response", "task_sha256", "verdict"})


class UnreadableRecord(dict[str, Any]):
    """A line that is not one JSON object with unique keys; the ratchet refuses it
    ``MALFORMED`` with ``detail``."""

    def __init__(self, detail: str) -> None:
        super().__init__()
        self.detail = detail


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r:.60}")
        out[key] = value
    return out


def loads_record(line: str) -> dict[str, Any]:
    """One JSONL line as a record: duplicate keys refused (as in certificates), at any depth.

    Returns:
        The record, or an ``UnreadableRecord`` saying why it is not one.
    """
    try:
        obj = json.loads(line, object_pairs_hook=_unique_keys)
    except ValueError as e:
        return UnreadableRecord(f"record: {e!s:.200}")
    if not isinstance(obj, dict):
        return UnreadableRecord("record: expected a JSON object")
    return obj


def _known(obj: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    if not isinstance(obj, Mapping):
        raise TypeError(f"{what}: expected an object")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise ValueError(f"{what}: unknown field {unknown[0]!r:.60}")


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
    if isinstance(record, UnreadableRecord):
        raise Refused(Reason.MALFORMED, record.detail)
    try:
        _known(record, TREE_FIELDS, "record")
        task = as_task(record["task"])
        attached = parse_proofs(record.get("consistency"))
        families = []
        for fam in record["families"]:
            _known(fam, FAMILY_FIELDS, "family")
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
        _known(ro, ROLLOUT_FIELDS, "rollout")
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
    if isinstance(record, UnreadableRecord):
        raise Refused(Reason.MALFORMED, record.detail)
    try:
        _known(record, GROUP_FIELDS, "group")
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


def signed_feasible(claims: Sequence[FeasibilityClaim]) -> int | None:
    """The feasible-label count the certificates of one task sign, or None when none signs
    one (a domain without enumeration).

    Raises:
        ValueError: two certificates of the task sign different counts.
    """
    counts = {c.feasible_labels for c in claims if c.feasible_labels is not None}
    if len(counts) > 1:
        raise ValueError(f"the certificates sign different feasible counts {sorted(counts)}")
    return counts.pop() if counts else None


def record_copies(
    record: Mapping[str, Any], families: Sequence[Family], claims: Sequence[FeasibilityClaim]
) -> list[tuple[Reason, str]]:
    """Refusals for what a fork-tree record says beyond its certificates: the same family or
    certificate listed twice (``DUPLICATE_FAMILY``), and a ``feasible_labels`` copy that is
    not the count certd signed (``TAMPERED_FEASIBLE``)."""
    out: list[tuple[Reason, str]] = []
    labels = [c.label for c in claims]  # the signed labels of the certificates that opened
    envelopes = [f.certificate.envelope for f in families]
    if len(set(labels)) != len(labels) or len(set(envelopes)) != len(envelopes):
        twice = sorted({x for x in labels if labels.count(x) > 1}) or ["(one certificate)"]
        out.append((Reason.DUPLICATE_FAMILY, f"listed more than once: {twice}"))
    try:
        signed = signed_feasible(claims)
    except ValueError as e:
        return [*out, (Reason.TAMPERED_FEASIBLE, str(e))]
    copy = record.get("feasible_labels")
    if signed is not None and copy is not None and copy != signed:
        out.append(
            (Reason.TAMPERED_FEASIBLE, f"feasible_labels {copy!r:.20} is not the signed {signed}")
        )
    return out


_STATS = ("complete", "negatives", "pseudo_forks", "samples", "tokens", "uncovered")
"""A fork-tree record's run statistics: no signed source, kept for the reader as written."""


def _signed_feasible_of(cert: authority_pb2.Certificate) -> dict[str, Any] | None:
    """The ``feasible`` object an (already verified) certificate's predicate signs."""
    statement = json.loads(Envelope.from_json(cert.envelope).payload)
    feasible = statement["predicate"].get("feasible")
    return feasible if isinstance(feasible, dict) else None


def reemit(record: Mapping[str, Any]) -> dict[str, Any]:
    """An admitted record as ``forkgate admit`` writes it: rebuilt from its parsed, verified
    values (the task in its canonical form, each certificate re-serialised, labels and
    witnesses the certificates sign, the signed feasible counts), never copied from the input.

    Args:
        record: a record the ratchet admitted.
    """
    if "rollouts" in record:
        task, family, rollouts, fam, attached = parse_group(record)
        out: dict[str, Any] = {"task": task_json(task), "family": family}
        out["rollouts"] = [
            {
                "response": r.response,
                "verdict": json_format.MessageToDict(r.verdict),
                "receipt": json_format.MessageToDict(r.receipt),
                **({"task_sha256": r.task_sha256} if r.task_sha256 else {}),
            }
            for r in rollouts
        ]
        if fam is not None:
            out["certificate"] = json_format.MessageToDict(fam.certificate)
            out["witness"] = fam.witness
    else:
        task, families, attached = parse_tree(record)
        out = {k: record[k] for k in _STATS if k in record}
        out.update(task=task_json(task), task_digest=task_digest(task))
        raw = {str(f["label"]): f for f in record["families"]}
        out["families"] = [
            {
                "label": f.label,
                "witness": f.witness,
                "certificate": json_format.MessageToDict(f.certificate),
                "forced": bool(raw[f.label].get("forced", False)),
            }
            for f in families
        ]
        signed = [x for x in map(_signed_feasible_of, (f.certificate for f in families)) if x]
        if signed:
            out["feasible"], out["feasible_labels"] = signed[0]["families"], signed[0]["labels"]
    if attached:
        out["consistency"] = proofs_json(attached)
    return out
