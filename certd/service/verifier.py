"""The Verifier service: Verify, VerifyBatch, VerifyStream.

Every call returns verdicts plus one signed receipt per batch (per group of verdicts on a
stream); the receipt is durable in the ledger before the reply leaves.

The path goes one way: the servicer validates the tasks (``convert.checked_task``), asks the
authority to check the items (``VerifyDispatch.check``: typed results back), asks it for the
receipt (``ReceiptIssuer.issue``: signed, logged, proved), and encodes both once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence

import grpc

from certd.authority.dispatch import VerifyDispatch
from certd.authority.feasibility import CheckedTask
from certd.authority.jobs import Job
from certd.authority.quota import LedgerQuota
from certd.authority.receipts import IssuedReceipt, ReceiptIssuer
from certd.authority.verify_items import CheckItem, CheckResult
from certd.config import CertdConfig
from certd.errors import InvalidInputError, LimitExceededError
from certd.service.access import client_of
from certd.service.convert import checked_task, encode_verdicts, proof_to_pb, verdict_to_pb
from certd.service.handlers import rpc_job
from certd.v1 import tasks_pb2, verifier_pb2, verifier_pb2_grpc

__all__ = ["VerifierServicer"]


class _TaskCache:
    """Converts each distinct task once, across batches (rollout batches repeat tasks n times,
    and the next batch asks about the same tasks again).

    Bounded: past ``max_entries`` tasks or ``max_bytes`` of wire tasks the oldest are
    forgotten. A cached task is a copy of the wire task, so it never keeps a request alive.
    Thread-safe: the gRPC threads share one cache (a miss converts under a lock).
    """

    def __init__(self, cfg: CertdConfig, max_entries: int = 4096, max_bytes: int = 8 << 20) -> None:
        self._cfg = cfg
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._seen: dict[bytes, CheckedTask] = {}
        self._lock = threading.Lock()

    def get(self, item: verifier_pb2.VerifyRequest, field: str) -> CheckedTask:
        """The checked task of a request.

        Raises:
            InvalidInputError, LimitExceededError, UnsupportedError: as ``checked_task``.
        """
        raw = item.task.SerializeToString(deterministic=True)
        hit = self._seen.get(raw)
        if hit is not None:
            return hit
        hit = checked_task(tasks_pb2.Task.FromString(raw), self._cfg, field)
        if len(raw) <= self._max_bytes:
            with self._lock:
                while self._seen and (
                    len(self._seen) >= self._max_entries or self._bytes + len(raw) > self._max_bytes
                ):
                    oldest = next(iter(self._seen))
                    self._bytes -= len(oldest)
                    del self._seen[oldest]
                if raw not in self._seen:
                    self._seen[raw] = hit
                    self._bytes += len(raw)
        return hit


class VerifierServicer(verifier_pb2_grpc.VerifierServicer):
    """Checks responses and signs receipts."""

    def __init__(
        self,
        cfg: CertdConfig,
        pool: VerifyDispatch,
        receipts: ReceiptIssuer,
        quota: LedgerQuota | None = None,
    ) -> None:
        self._cfg = cfg
        self._pool = pool
        self._receipts = receipts
        self._quota = quota or LedgerQuota.from_config(cfg.limits)
        self._tasks = _TaskCache(cfg)

    @staticmethod
    def _pb(item: CheckItem, result: CheckResult) -> verifier_pb2.Verdict:
        pb = verdict_to_pb(result.verdict, item.item_id, result.elapsed_ms)
        pb.digest = result.digest
        return pb

    def _receipt(
        self,
        verdicts: Sequence[verifier_pb2.Verdict],
        digests: Sequence[bytes],
        seq: int,
        principal: str,
    ) -> verifier_pb2.Receipt:
        """A stream group's receipt (its verdicts have left already, without paths)."""
        issued = self._receipts.issue(digests, [v.verifier for v in verdicts])
        self._quota.charge(principal, entries=1, nbytes=len(issued.envelope))
        return _receipt_pb(issued, len(digests), seq)

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
        checks = [
            _item(req, self._tasks.get(req, f"{field}[{i}].task")) for i, req in enumerate(items)
        ]
        results = self._pool.check(checks, job)
        issued = self._receipts.issue(
            [r.digest for r in results], [r.verdict.verifier for r in results]
        )
        self._quota.charge(principal, entries=1, nbytes=len(issued.envelope))
        reply = encode_verdicts(checks, results, issued.paths)  # each verdict with its path
        reply.receipt.CopyFrom(_receipt_pb(issued, len(results)))
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
        job = rpc_job(context)
        principal = client_of(context)
        group: list[verifier_pb2.Verdict] = []
        digests: list[bytes] = []
        seq = 0
        for n, req in enumerate(request_iterator):
            if not group:
                self._quota.admit(principal)  # a group admitted under the quota completes
            check = _item(req, self._tasks.get(req, f"stream[{n}].task"))
            [result] = self._pool.check([check], job)
            verdict = self._pb(check, result)
            verdict.receipt_path.CopyFrom(
                verifier_pb2.ReceiptPath(index=len(group), receipt_seq=seq)
            )
            group.append(verdict)
            digests.append(result.digest)
            yield verifier_pb2.VerifyStreamResponse(verdict=verdict)
            if len(group) == every:
                receipt = self._receipt(group, digests, seq, principal)
                yield verifier_pb2.VerifyStreamResponse(receipt=receipt)
                group, digests, seq = [], [], seq + 1
        if group:
            receipt = self._receipt(group, digests, seq, principal)
            yield verifier_pb2.VerifyStreamResponse(receipt=receipt)


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
