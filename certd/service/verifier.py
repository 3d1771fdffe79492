"""The Verifier service: Verify, VerifyBatch, VerifyStream.

Every call returns verdicts plus one signed receipt per batch (per group of verdicts on a
stream); the receipt is durable in the ledger before the reply leaves.

The path goes one way: the servicer validates the tasks (``TaskCache.get``, shared with the
Authority service), calls the authority once (``Verification.verify``, or
``Verification.verify_stream`` for a whole stream: typed results with their issued receipt),
and encodes what comes back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import grpc

from certd.authority.feasibility import CheckedTask
from certd.authority.jobs import Job
from certd.authority.quota import LedgerQuota
from certd.authority.receipts import IssuedReceipt
from certd.authority.verification import Verification
from certd.authority.verify_items import CheckItem
from certd.config import CertdConfig
from certd.errors import InvalidInputError, LimitExceededError
from certd.service.access import client_of
from certd.service.convert import encode_verdicts, proof_to_pb, verdict_to_pb
from certd.service.handlers import rpc_job
from certd.service.taskcache import TaskCache
from certd.v1 import verifier_pb2, verifier_pb2_grpc

__all__ = ["VerifierServicer"]


class VerifierServicer(verifier_pb2_grpc.VerifierServicer):
    """Checks responses and signs receipts: validate, one authority call, encode."""

    def __init__(
        self,
        cfg: CertdConfig,
        verification: Verification,
        quota: LedgerQuota | None = None,
        tasks: TaskCache | None = None,
    ) -> None:
        self._cfg = cfg
        self._verification = verification
        self._quota = quota or LedgerQuota.from_config(cfg.limits)
        self._tasks = tasks or TaskCache(cfg)

    def _batch(
        self,
        items: Sequence[verifier_pb2.VerifyRequest],
        field: str,
        job: Job,
        principal: str,
    ) -> verifier_pb2.VerifyBatchResponse:
        if not items:
            raise InvalidInputError(f"{field}: expected at least one item, got none", field=field)
        limit = self._cfg.limits.max_batch_items
        if len(items) > limit:
            raise LimitExceededError(
                f"{field}: at most {limit} items per batch, got {len(items)}", field=field
            )
        self._quota.admit(principal)
        get = self._tasks.get
        checks = [_item(req, get(req.task, f"{field}[{i}].task")) for i, req in enumerate(items)]
        done = self._verification.verify(checks, job)
        issued = done.receipt
        self._quota.charge(principal, entries=1, nbytes=len(issued.envelope))
        reply = encode_verdicts(checks, done.results, issued.paths)  # each verdict with its path
        reply.receipt.CopyFrom(_receipt_pb(issued, len(done.results)))
        return reply

    def Verify(
        self, request: verifier_pb2.VerifyRequest, context: grpc.ServicerContext
    ) -> verifier_pb2.VerifyResponse:
        reply = self._batch([request], "request", rpc_job(context), client_of(context))
        return verifier_pb2.VerifyResponse(verdict=reply.verdicts[0], receipt=reply.receipt)

    def VerifyBatch(
        self, request: verifier_pb2.VerifyBatchRequest, context: grpc.ServicerContext
    ) -> verifier_pb2.VerifyBatchResponse:
        return self._batch(request.items, "items", rpc_job(context), client_of(context))

    def VerifyStream(
        self,
        request_iterator: Iterable[verifier_pb2.VerifyRequest],
        context: grpc.ServicerContext,
    ) -> Iterator[verifier_pb2.VerifyStreamResponse]:
        """One verdict per request, at once; a receipt after each group of verdicts.

        A receipt with ``receipt_seq`` k covers the verdicts whose ``receipt_path.receipt_seq``
        is k, in stream order; the client recomputes the batch root from their digests (the
        paths are not known when a verdict leaves). Groups close every
        ``stream_receipt_every`` verdicts and at the end of the stream.
        """
        every = self._cfg.limits.stream_receipt_every
        principal = client_of(context)
        checks: list[CheckItem] = []  # the open group's items (their ids)

        def items() -> Iterator[CheckItem]:
            for n, req in enumerate(request_iterator):
                if n % every == 0:
                    self._quota.admit(principal)  # a group admitted under the quota completes
                checks.append(_item(req, self._tasks.get(req.task, f"stream[{n}].task")))
                yield checks[-1]

        seq = 0
        for event in self._verification.verify_stream(items(), every, rpc_job(context)):
            if isinstance(event, IssuedReceipt):
                self._quota.charge(principal, entries=1, nbytes=len(event.envelope))
                receipt = _receipt_pb(event, len(checks), seq)
                yield verifier_pb2.VerifyStreamResponse(receipt=receipt)
                checks.clear()
                seq += 1
                continue
            verdict = verdict_to_pb(event.verdict, checks[-1].item_id, event.elapsed_ms)
            verdict.digest = event.digest
            where = verifier_pb2.ReceiptPath(index=len(checks) - 1, receipt_seq=seq)
            verdict.receipt_path.CopyFrom(where)
            yield verifier_pb2.VerifyStreamResponse(verdict=verdict)


def _receipt_pb(issued: IssuedReceipt, size: int, seq: int = 0) -> verifier_pb2.Receipt:
    return verifier_pb2.Receipt(
        envelope=issued.envelope,
        batch_root=issued.root,
        batch_size=size,
        inclusion=proof_to_pb(issued.index, issued.envelope, issued.checkpoint, issued.proof),
        receipt_seq=seq,
    )


def _item(req: verifier_pb2.VerifyRequest, task: CheckedTask) -> CheckItem:
    return CheckItem(req.id, task.value, task.digest, req.response, task.domain)
