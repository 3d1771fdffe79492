"""Conversions between wire messages and domain objects (the only place that does them).

Example:
    >>> from certd.config import CertdConfig
    >>> from certd.v1 import tasks_pb2
    >>> pb = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83))
    >>> checked_task(pb, CertdConfig()).value.numbers
    (25, 5, 4, 3)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from certd.authority.results import CheckedTask, IndexedCertificate, Proven
from certd.authority.verifypool import CheckItem, CheckResult
from certd.config import CertdConfig
from certd.domains import code as cc
from certd.domains import countdown as cd
from certd.domains.verdict import Family, Verdict
from certd.errors import InvalidInputError, LimitExceededError, UnsupportedError
from certd.ledger import merkle
from certd.ledger.checkpoint import SignedCheckpoint
from certd.payloads import task_digest
from certd.v1 import authority_pb2, ledger_pb2, tasks_pb2, verifier_pb2

__all__ = [
    "certificate_to_pb",
    "checked_task",
    "encode_verdicts",
    "label_to_pb",
    "proof_to_pb",
    "signed_checkpoint_to_pb",
    "verdict_to_pb",
]


def checked_task(task: tasks_pb2.Task, cfg: CertdConfig, field: str = "task") -> CheckedTask:
    """Validate a wire task and convert it once.

    Raises:
        InvalidInputError: the task is malformed (``field`` names where).
        LimitExceededError: the task is over a configured limit.
        UnsupportedError: the task's domain is not served here.
    """
    domain = task.WhichOneof("domain")
    if domain is None:
        raise InvalidInputError(
            "task: expected one of countdown, math, code; got none", field=field
        )
    convert = _CONVERTERS.get(domain)
    if convert is None:
        raise UnsupportedError(
            f"domain {domain!r} is not served by this certd (served: {', '.join(_CONVERTERS)})"
        )
    try:
        value = convert(getattr(task, domain), cfg, f"{field}.{domain}")
    except InvalidInputError as e:
        if e.field.startswith(f"{field}."):
            raise
        raise type(e)(str(e), field=f"{field}.{e.field}" if e.field else field) from e
    return CheckedTask(pb=task, digest=task_digest(task), domain=domain, value=value)


def _countdown_task(pb: tasks_pb2.CountdownTask, cfg: CertdConfig, field: str) -> cd.CountdownTask:
    numbers = tuple(pb.numbers)
    if len(numbers) > cfg.countdown.max_numbers:
        raise LimitExceededError(
            f"countdown.numbers: at most {cfg.countdown.max_numbers} numbers, got {len(numbers)}",
            field=f"{field}.numbers",
        )
    return cd.CountdownTask(
        numbers=numbers,
        target=pb.target,
        rules=cd.CountdownRules(exactly_once=not pb.rules.at_most_once),
    )


def _code_task(pb: tasks_pb2.CodeTask, cfg: CertdConfig, field: str) -> cc.CodeTask:
    c = cfg.code
    limits = cc.CodeLimits(
        max_program_bytes=c.max_program_bytes,
        max_cases=c.max_cases,
        max_case_bytes=c.max_case_bytes,
        max_response_bytes=c.max_response_bytes,
    )
    language = pb.language or "python"
    if language not in cc.LANGUAGES:
        raise InvalidInputError(
            f"language: expected one of {', '.join(cc.LANGUAGES)}, got {language!r}",
            field=f"{field}.language",
        )
    function_layout = bool(pb.test or pb.entry_point or pb.prompt)
    try:
        if pb.cases:
            if function_layout:
                raise InvalidInputError(
                    "expected either cases or prompt/test/entry_point, got both", field=field
                )
            cases = [cc.IoCase(stdin=t.stdin, stdout=t.stdout) for t in pb.cases]
            return cc.CodeTask.io_cases(
                language, cases, compare=pb.compare or "exact", limits=limits
            )
        if language != "python":
            raise InvalidInputError(
                f"language: function tests are Python only, got {language!r} without cases",
                field=f"{field}.language",
            )
        return cc.CodeTask.function_tests(
            prompt=pb.prompt, test=pb.test, entry_point=pb.entry_point, limits=limits
        )
    except InvalidInputError as e:
        if e.field:
            raise
        what = str(e).split(":", 1)[0]
        sub = what if what in ("cases", "compare", "test", "entry_point", "prompt") else ""
        raise type(e)(str(e), field=f"{field}.{sub}" if sub else field) from e


def _math_task(pb: tasks_pb2.MathTask, cfg: CertdConfig, field: str) -> object:
    if len(pb.gold) > cfg.math.max_gold_chars:
        raise LimitExceededError(
            f"math.gold: at most {cfg.math.max_gold_chars} chars, got {len(pb.gold)}",
            field=f"{field}.gold",
        )
    try:  # the task is plain data, but its package imports SymPy
        from certd.domains.math.task import MathTask
    except ImportError:  # no math extra: math is not served here, and the dispatch answers
        return pb  # each such item "domain not served here"; the wire message stands in
    digits = pb.precision_digits or None  # 0 (unset): exact comparison
    return MathTask(gold=pb.gold, precision_digits=digits, question=pb.question)


# The wire task's oneof name → a converter that validates the domain message and returns the
# domain's (frozen) task value. A domain is served when it has a converter here and a checker in
# ``certd.authority.checker.Checkers``. A converter's typed errors name their field either in
# full (under the ``field`` it is given, e.g. ``items[3].task.math.gold``) or from the task's
# root (``math.gold``, as domain constructors do).
_CONVERTERS: dict[str, Callable[[Any, CertdConfig, str], object]] = {
    "countdown": _countdown_task,
    "code": _code_task,
    "math": _math_task,
}


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
        leaf_hash=merkle.leaf_hash(entry),
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
