"""The part of the certd clients that does no I/O: requests, error mapping, verification.

Example:
    >>> task = {"domain": "countdown", "task": {"numbers": [3, 5, 7], "target": 22}}
    >>> request = certify_request(task, "3,*", "3*5+7")
    >>> request.task.WhichOneof("domain"), request.label.value
    ('countdown', '3,*')

``CertdClient`` and ``AsyncCertdClient`` mirror each other method for method over this base;
how they reach certd (settings, target, credentials) is ``forkgate._channel``.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import grpc
from google.rpc.error_details_pb2 import BadRequest, ErrorInfo, RequestInfo
from grpc_status import rpc_status

from certd.errors import CertdError
from certd.v1 import authority_pb2, ledger_pb2, tasks_pb2, verifier_pb2

from .errors import (
    CertdUnavailableError,
    CertificationRefusedError,
    DeadlineExceededError,
    ForkgateError,
    InvalidRequestError,
    NotFoundError,
    ResourceExhaustedError,
    ServerError,
    UnimplementedError,
    VerificationError,
)
from .tasks import TaskLike, as_task

if TYPE_CHECKING:  # signing and statements load only when receipts are checked (start-up time)
    from certd.signing.dsse import KeyRing
    from certd.signing.keys import VerifierKey

ERROR_DOMAIN = "certd"
"""``ErrorInfo.domain`` of certd's refusals (``certd.service.interceptors.ERROR_DOMAIN``)."""

__all__ = [
    "StreamChecker",
    "VerifyItem",
    "VerifyLike",
    "load_keyring",
    "map_rpc_error",
]


@dataclass(frozen=True, slots=True)
class VerifyItem:
    """One response to check."""

    task: TaskLike
    response: str
    id: str = ""


VerifyLike = (
    verifier_pb2.VerifyRequest | VerifyItem | tuple[TaskLike, str] | tuple[TaskLike, str, str]
)


def load_keyring(keys: KeyRing | Iterable[str | Path | VerifierKey] | None) -> KeyRing | None:
    """A KeyRing from vkey strings, files holding a vkey, or VerifierKeys (None stays None).

    A file holding a key-rotation record (``key-rotation-R.json``, written by ``certd
    rotate-key``) makes the ring follow the log: the record is verified with the keys given
    (its entry included at index R under a checkpoint they sign), then the old key may sign
    up to R and the new key from R + 1 (``certd.keyrotation``).

    Raises:
        VerificationError: a key or a rotation record cannot be parsed or does not verify.
    """
    if keys is None:
        return None
    from certd.signing.dsse import KeyRing
    from certd.signing.keys import VerifierKey, read_verifier_key

    if isinstance(keys, KeyRing):
        return keys
    parsed: list[VerifierKey] = []
    records: list[Any] = []
    for k in keys:
        try:
            if isinstance(k, VerifierKey):
                parsed.append(k)
            elif (record := _rotation_record(k)) is not None:
                records.append(record)
            else:
                parsed.append(read_verifier_key(k))
        except CertdError as e:
            raise VerificationError(f"trusted key: {e}") from e
    return _follow(KeyRing(parsed), records)


def _rotation_record(source: str | Path) -> Any:
    """The JSON of a key-rotation record file, or None for anything else."""
    path = Path(source)
    try:
        if not path.is_file() or path.read_bytes()[:1] != b"{":
            return None
        obj = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) and "keyRotation" in obj else None


def _follow(ring: KeyRing, records: list[Any]) -> KeyRing:
    from certd.keyrotation import Rotation, follow, open_rotation_record

    rotations: list[Rotation] = []
    for record in records:
        try:
            rotations.append(open_rotation_record(record, follow(ring, rotations)))
        except CertdError as e:
            raise VerificationError(f"trusted key: key-rotation record: {e}") from e
    return follow(ring, rotations) if rotations else ring


@dataclass(frozen=True, slots=True)
class _Details:
    """What a failed call's ``google.rpc.Status`` details say (AIP-193)."""

    request_id: str = ""
    field: str = ""
    reason: str = ""  # an ErrorInfo reason of certd's domain: a refusal code


def _details(error: grpc.RpcError) -> _Details:
    # A sync call's error is a grpc.Call; an aio one (AioRpcError) has the same sync getters.
    call = cast(grpc.Call, error)
    try:
        status = rpc_status.from_call(call) if hasattr(error, "trailing_metadata") else None
    except ValueError:  # code or message differ from the details: trust none of them
        status = None
    found: dict[str, str] = {}
    for detail in status.details if status is not None else ():
        info, bad, request = ErrorInfo(), BadRequest(), RequestInfo()
        if detail.Unpack(info) and info.domain == ERROR_DOMAIN:
            found["reason"] = info.reason
        elif detail.Unpack(bad) and bad.field_violations:
            found["field"] = bad.field_violations[0].field
        elif detail.Unpack(request):
            found["request_id"] = request.request_id
    return _Details(**found)


def map_rpc_error(error: grpc.RpcError) -> ForkgateError:
    """Translate a gRPC error into the client's typed error (the one place that does)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = (error.details() if hasattr(error, "details") else "") or str(code)
    got = _details(error)
    rid = got.request_id
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidRequestError(details, field=got.field, request_id=rid)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ResourceExhaustedError(details, field=got.field, request_id=rid)
    if code == grpc.StatusCode.FAILED_PRECONDITION and got.reason:
        return CertificationRefusedError(details, reason=got.reason, request_id=rid)
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFoundError(details, request_id=rid)
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return UnimplementedError(details, request_id=rid)
    if code == grpc.StatusCode.UNAVAILABLE:
        return CertdUnavailableError(details, request_id=rid)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceededError(details, request_id=rid)
    return ServerError(f"{code.name}: {details}", request_id=rid)


def verify_requests(items: Iterable[VerifyLike]) -> list[verifier_pb2.VerifyRequest]:
    """VerifyRequests from requests, items or (task, response[, id]) tuples.

    A rollout batch repeats each task object n times; each distinct object is converted once.
    """
    converted: dict[int, tuple[object, tasks_pb2.Task]] = {}
    out = []
    for item in items:
        if isinstance(item, verifier_pb2.VerifyRequest):
            out.append(item)
            continue
        if not isinstance(item, VerifyItem):
            item = VerifyItem(*item)
        hit = converted.get(id(item.task))
        if hit is None:  # keep the object alive so its id is not reused within the call
            hit = converted[id(item.task)] = (item.task, as_task(item.task))
        out.append(verifier_pb2.VerifyRequest(id=item.id, task=hit[1], response=item.response))
    return out


def chunks(
    items: Sequence[verifier_pb2.VerifyRequest], size: int
) -> Iterator[Sequence[verifier_pb2.VerifyRequest]]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def check_batch(
    requests: Sequence[verifier_pb2.VerifyRequest],
    reply: verifier_pb2.VerifyBatchResponse,
    keys: KeyRing | None,
) -> list[verifier_pb2.Verdict]:
    """Check a VerifyBatch reply: one verdict per request, in order, covered by the receipt.

    Raises:
        VerificationError: a count, id, digest, path or signature does not match.
    """
    if len(reply.verdicts) != len(requests):
        raise VerificationError(f"verdicts: expected {len(requests)}, got {len(reply.verdicts)}")
    if keys is not None:
        from certd.statements import task_digest, verify_receipt, verify_verdict

        try:
            claim = verify_receipt(reply.receipt, keys)
            digests: dict[bytes, str] = {}  # a rollout batch repeats each task
            for req, verdict in zip(requests, reply.verdicts, strict=True):
                wire = req.task.SerializeToString(deterministic=True)
                sha = digests.get(wire)
                if sha is None:
                    sha = digests[wire] = task_digest(req.task)
                verify_verdict(verdict, req.task, req.response, claim, task_sha256=sha)
        except CertdError as e:
            raise VerificationError(f"receipt: {e}") from e
    for req, verdict in zip(requests, reply.verdicts, strict=True):
        if verdict.id != req.id:
            raise VerificationError(f"verdict id: expected {req.id!r}, got {verdict.id!r}")
    return list(reply.verdicts)


def check_certificate(
    cert: authority_pb2.Certificate, keys: KeyRing | None, task: tasks_pb2.Task | None = None
) -> authority_pb2.Certificate:
    """Verify a certificate offline when trusted keys are set.

    Raises:
        VerificationError: signature, statement, witness or inclusion proof does not verify.
    """
    if keys is not None:
        from certd.statements import verify_certificate

        try:
            verify_certificate(cert, keys, task=task)
        except CertdError as e:
            raise VerificationError(f"certificate {cert.certificate_id[:16]}: {e}") from e
    return cert


def certify_request(
    task: TaskLike,
    label: str,
    witness: str,
    kappa: str = "",
    fields: Mapping[str, str] | None = None,
) -> authority_pb2.CertifyRequest:
    """A CertifyRequest (κ empty: the domain's default; ``fields``: the claimed label's)."""
    return authority_pb2.CertifyRequest(
        task=as_task(task),
        label=tasks_pb2.Label(kappa=kappa, value=label, fields=dict(fields or {})),
        witness=witness,
    )


def rotation_records(reply: ledger_pb2.GetKeyRotationsResponse) -> list[dict[str, object]]:
    """The records of a GetKeyRotations reply, oldest first, as ``--trust`` takes them
    (for ``certd.keyrotation.open_rotation_record``; nothing trusted here)."""
    from certd.keyrotation import rotation_record

    return [
        rotation_record(
            r.ledger_index,
            r.entry,
            r.inclusion.checkpoint.note,
            r.inclusion.tree_size,
            list(r.inclusion.hashes),
        )
        for r in reply.rotations
    ]


class StreamChecker:
    """Matches VerifyStream replies to the requests sent and checks each group's receipt.

    Feed it every request as it goes out (``sent``) and every reply as it comes in
    (``received``); it returns the verdicts that are ready, in order. With trusted keys a
    verdict is released only after its group's receipt verified: the client recomputes each
    verdict digest from its own task and response and the group's root from those digests.
    """

    def __init__(self, keys: KeyRing | None) -> None:
        self._keys = keys
        self._sent: deque[verifier_pb2.VerifyRequest] = deque()
        self._group: list[tuple[verifier_pb2.VerifyRequest, verifier_pb2.Verdict]] = []

    def sent(self, request: verifier_pb2.VerifyRequest) -> verifier_pb2.VerifyRequest:
        """Record an outgoing request; return it."""
        self._sent.append(request)
        return request

    def received(self, reply: verifier_pb2.VerifyStreamResponse) -> list[verifier_pb2.Verdict]:
        """Take one reply; return the verdicts now ready.

        Raises:
            VerificationError: a verdict or receipt does not match what was sent.
        """
        if reply.HasField("verdict"):
            if not self._sent:
                raise VerificationError("VerifyStream: a verdict for no request")
            request = self._sent.popleft()
            if reply.verdict.id != request.id:
                raise VerificationError(
                    f"verdict id: expected {request.id!r}, got {reply.verdict.id!r}"
                )
            if self._keys is None:
                return [reply.verdict]
            self._group.append((request, reply.verdict))
            return []
        if self._keys is None:
            return []
        from certd.statements import batch_tree, task_digest, verdict_digest, verify_receipt

        group, self._group = self._group, []
        try:
            claim = verify_receipt(reply.receipt, self._keys)
            digests = [verdict_digest(v, task_digest(r.task), r.response) for r, v in group]
        except CertdError as e:
            raise VerificationError(f"stream receipt {reply.receipt.receipt_seq}: {e}") from e
        if [v.digest for _, v in group] != digests or batch_tree(digests)[0] != claim.batch_root:
            raise VerificationError(
                f"stream receipt {reply.receipt.receipt_seq} does not cover the verdicts received"
            )
        return [v for _, v in group]

    def finish(self) -> None:
        """Check that every request got a verdict and every verdict a receipt.

        Raises:
            VerificationError: the stream ended early.
        """
        if self._sent or self._group:
            raise VerificationError(
                f"VerifyStream ended with {len(self._sent)} requests unanswered and "
                f"{len(self._group)} verdicts without a receipt"
            )
