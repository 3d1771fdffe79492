"""Conversions between wire messages and domain objects (the only place that does them).

Example:
    >>> from certd.config import CertdConfig
    >>> from certd.v1 import tasks_pb2
    >>> pb = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83))
    >>> checked_task(pb, CertdConfig()).value.numbers
    (25, 5, 4, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from certd import tlog
from certd.authority.results import CheckedTask, IndexedCertificate, Proven
from certd.authority.verify_items import CheckItem, CheckResult
from certd.config import CertdConfig
from certd.domains import registry as domains
from certd.domains.verdict import Family, Verdict
from certd.errors import InvalidInputError, UnsupportedError
from certd.payloads import task_digest
from certd.taskspec import domain_names
from certd.tlog import SignedCheckpoint
from certd.v1 import authority_pb2, ledger_pb2, tasks_pb2, verifier_pb2

__all__ = [
    "certificate_to_pb",
    "checked_task",
    "domain_value",
    "encode_verdicts",
    "label_to_pb",
    "proof_to_pb",
    "signed_checkpoint_to_pb",
    "verdict_to_pb",
]


def checked_task(task: tasks_pb2.Task, cfg: CertdConfig, field: str = "task") -> CheckedTask:
    """Validate a wire task and convert it once (by its domain's ``DomainSpec.convert``).

    Raises:
        InvalidInputError: the task is malformed (``field`` names where).
        LimitExceededError: the task is over a configured limit.
        UnsupportedError: the task's domain is not served here.
    """
    domain = task.WhichOneof("domain")
    if domain is None:
        raise InvalidInputError(
            f"task: expected one of {', '.join(domain_names())}; got none", field=field
        )
    value = domain_value(domain, getattr(task, domain), cfg, field)
    return CheckedTask(pb=task, digest=task_digest(task), domain=domain, value=value)


def domain_value(domain: str, message: Any, cfg: CertdConfig, field: str = "task") -> object:
    """A domain message (the wire ``Task``'s oneof part) as the domain's task value.

    Raises:
        InvalidInputError, LimitExceededError: as the domain's ``DomainSpec.convert``; the
            field is named under ``field`` (``task.math.gold``).
        UnsupportedError: no domain of that name is registered.
    """
    spec = domains.get(domain)
    if spec is None:
        served = ", ".join(s.name for s in domains.specs())
        raise UnsupportedError(f"domain {domain!r} is not served by this certd (served: {served})")
    try:
        return spec.convert(message, spec.section(cfg), f"{field}.{domain}")
    except InvalidInputError as e:
        if e.field.startswith(f"{field}."):
            raise
        raise type(e)(str(e), field=f"{field}.{e.field}" if e.field else field) from e


def label_to_pb(family: Family | None) -> tasks_pb2.Label | None:
    """A κ label as a wire message (None stays None)."""
    if family is None:
        return None
    return tasks_pb2.Label(kappa=family.kappa, value=family.label, fields=family.fields)


def _label_fields(family: Family | None) -> dict[str, object] | None:
    if family is None:
        return None
    return {"kappa": family.kappa, "value": family.label, "fields": family.fields}


def _verdict_fields(verdict: Verdict, item_id: str, elapsed_ms: float) -> dict[str, Any]:
    """A verdict's wire fields (message fields as dicts: the cheapest way to build them)."""
    return {
        "id": item_id,
        "status": int(verdict.status),  # enum values match the proto
        "reward": verdict.reward,
        "family": _label_fields(verdict.family),
        "initiated": _label_fields(verdict.initiated),
        "detail": verdict.detail,
        "verifier": verdict.verifier,
        "elapsed_ms": elapsed_ms,
        "answer": verdict.answer,
        "labels": [_label_fields(f) for f in verdict.labels],
    }


def verdict_to_pb(verdict: Verdict, item_id: str, elapsed_ms: float) -> verifier_pb2.Verdict:
    """A verdict as a wire message, without digest and receipt path."""
    return verifier_pb2.Verdict(**_verdict_fields(verdict, item_id, elapsed_ms))


def encode_verdicts(
    items: Sequence[CheckItem],
    results: Sequence[CheckResult],
    paths: Sequence[Sequence[bytes]] | None = None,
) -> verifier_pb2.VerifyBatchResponse:
    """A batch's verdicts, with their digests, as a reply (the receipt not yet set).

    Args:
        items: the checked items (their ids).
        results: the authority's results, one per item, in the same order.
        paths: each verdict's inclusion path in the batch's receipt (``receipt_path`` is set
            with index, batch size and hashes); None leaves ``receipt_path`` unset.
    """
    reply = verifier_pb2.VerifyBatchResponse()
    add = reply.verdicts.add
    if paths is None:
        for item, result in zip(items, results, strict=True):
            fields = _verdict_fields(result.verdict, item.item_id, result.elapsed_ms)
            add(digest=result.digest, **fields)
        return reply
    size = len(results)
    for i, (item, result, path) in enumerate(zip(items, results, paths, strict=True)):
        fields = _verdict_fields(result.verdict, item.item_id, result.elapsed_ms)
        where = {"index": i, "batch_size": size, "hashes": path}  # a dict: the cheapest build
        add(digest=result.digest, receipt_path=where, **fields)
    return reply


def signed_checkpoint_to_pb(
    note: str, origin: str, size: int, root: bytes
) -> ledger_pb2.SignedCheckpoint:
    """A signed checkpoint note as a wire message."""
    return ledger_pb2.SignedCheckpoint(note=note, origin=origin, size=size, root_hash=root)


def proof_to_pb(
    index: int, entry: bytes, signed: SignedCheckpoint, hashes: Sequence[bytes]
) -> ledger_pb2.InclusionProof:
    """An inclusion proof the caller already holds (entry ``index`` in ``signed``)."""
    cp = signed.checkpoint
    return ledger_pb2.InclusionProof(
        leaf_index=index,
        tree_size=cp.size,
        hashes=hashes,
        leaf_hash=tlog.leaf_hash(entry),
        checkpoint=signed_checkpoint_to_pb(signed.note, cp.origin, cp.size, cp.root_hash),
    )


def certificate_to_pb(proven: Proven[IndexedCertificate]) -> authority_pb2.Certificate:
    """A durable certificate with the inclusion proof the authority returned with it."""
    cert = proven.value
    return authority_pb2.Certificate(
        envelope=cert.envelope,
        certificate_id=cert.certificate_id,
        ledger_index=cert.index,
        inclusion=proof_to_pb(cert.index, cert.envelope, proven.checkpoint, proven.proof),
        label=tasks_pb2.Label(kappa=cert.kappa, value=cert.label, fields=cert.label_fields),
        witness=cert.witness,
    )
