"""The asyncio certd client; mirrors ``CertdClient`` method for method.

Example::

    async with AsyncCertdClient("127.0.0.1:50051", trusted_keys=[vkey]) as c:
        verdicts = await c.verify_batch([(task, response, "r1")])
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import grpc.aio

from certd.v1 import authority_pb2, info_pb2, ledger_pb2, verifier_pb2

from ._base import (
    StreamChecker,
    VerifyItem,
    VerifyLike,
    certify_request,
    check_batch,
    check_certificate,
    chunks,
    load_keyring,
    map_rpc_error,
    rotation_records,
    verify_requests,
)
from ._channel import ClientSettings, Stubs, call_metadata, channel_spec
from .errors import CertificationRefusedError, UsedAfterForkError
from .tasks import TaskLike, as_task
from .verdicts import TypedVerdict

if TYPE_CHECKING:  # signing loads only when receipts are checked (start-up time)
    from certd.signing.dsse import KeyRing
    from certd.signing.keys import VerifierKey

__all__ = ["AsyncCertdClient"]

T = TypeVar("T")


class AsyncCertdClient:
    """An asyncio client for certd; see ``CertdClient`` for the arguments.

    Unlike ``CertdClient`` it does not connect again after ``fork()``: used in a child process
    it raises ``UsedAfterForkError`` before anything reaches gRPC, and ``close()`` there does
    nothing. A rebuilt channel would not help: its event loop cannot be carried across the
    fork, and neither can ``grpc.aio``'s own process-wide state (with grpcio 1.85, a new
    ``grpc.aio`` channel in a child forked while the parent held one crashed, with SIGSEGV or
    an abort in gRPC's epoll poller, or never got a reply). A forked child (a DataLoader
    worker) uses a ``CertdClient``, which reconnects there; an ``AsyncCertdClient`` belongs
    to a process started with ``spawn``.
    """

    def __init__(
        self,
        address: str | Sequence[str] = "127.0.0.1:50051",
        *,
        trusted_keys: KeyRing | Iterable[str | Path | VerifierKey] | None = None,
        settings: ClientSettings | None = None,
        tls_ca: str | Path | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        token: str | None = None,
        tls_server_name: str | None = None,
    ) -> None:
        self.settings = settings or ClientSettings()
        self.keys = load_keyring(trusted_keys)
        spec = channel_spec(
            address,
            self.settings,
            tls_ca=tls_ca,
            tls_cert=tls_cert,
            tls_key=tls_key,
            token=token,
            tls_server_name=tls_server_name,
        )
        if spec.credentials is None:
            self._channel = grpc.aio.insecure_channel(spec.target, options=spec.options)
        else:
            self._channel = grpc.aio.secure_channel(
                spec.target, spec.credentials, options=spec.options
            )
        self._channel_stubs = Stubs.on(self._channel)
        self._channel_pid = os.getpid()

    async def __aenter__(self) -> AsyncCertdClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel; in a process forked from the one that made the client, leave it
        to the parent (see ``_stubs``)."""
        if self._channel_pid == os.getpid():
            await self._channel.close(None)

    def _stubs(self) -> Stubs:
        """The stubs every call goes through, in the process that made them (one
        ``os.getpid()`` per call).

        Raises:
            UsedAfterForkError: this is a process forked from the one that made the client.
        """
        if self._channel_pid != os.getpid():
            raise UsedAfterForkError(
                f"AsyncCertdClient made in process {self._channel_pid} was used in process "
                f"{os.getpid()} after fork(); use a CertdClient in the child (grpc.aio does "
                "not survive fork), or start the child with 'spawn'"
            )
        return self._channel_stubs

    async def _call(
        self, fn: Callable[..., Awaitable[T]], request: Any, idempotent: bool = False
    ) -> T:
        """One call, retried by gRPC; see ``CertdClient._call``."""
        try:
            return await fn(
                request,
                timeout=self.settings.timeout_s,
                metadata=call_metadata(idempotent),
                wait_for_ready=self.settings.wait_for_ready,
            )
        except grpc.RpcError as e:
            raise map_rpc_error(e) from e

    async def verify(self, task: TaskLike, response: str, id: str = "") -> TypedVerdict:
        """Check one response, typed; see ``CertdClient.verify``."""
        return (await self.verify_batch([VerifyItem(task, response, id)]))[0]

    async def verify_batch(self, items: Iterable[VerifyLike]) -> list[TypedVerdict]:
        """Check many responses, typed; see ``CertdClient.verify_batch``."""
        return [TypedVerdict.of(v) for v in await self.verify_batch_pb(items)]

    async def verify_pb(self, task: TaskLike, response: str, id: str = "") -> verifier_pb2.Verdict:
        """Check one response, as a protobuf; see ``CertdClient.verify_pb``."""
        return (await self.verify_batch_pb([VerifyItem(task, response, id)]))[0]

    async def verify_batch_pb(self, items: Iterable[VerifyLike]) -> list[verifier_pb2.Verdict]:
        """Check many responses, as protobufs; see ``CertdClient.verify_batch_pb``."""
        return [verdict for verdict, _ in await self.verify_batch_receipted(items)]

    async def verify_typed(self, task: TaskLike, response: str, id: str = "") -> TypedVerdict:
        """The same as ``verify``; see ``CertdClient.verify_typed``."""
        return await self.verify(task, response, id)

    async def verify_batch_typed(self, items: Iterable[VerifyLike]) -> list[TypedVerdict]:
        """The same as ``verify_batch``; see ``CertdClient.verify_batch_typed``."""
        return await self.verify_batch(items)

    async def verify_batch_receipted(
        self, items: Iterable[VerifyLike]
    ) -> list[tuple[verifier_pb2.Verdict, verifier_pb2.Receipt]]:
        """Verdicts with their receipts; see ``CertdClient.verify_batch_receipted``."""
        requests = verify_requests(items)
        out: list[tuple[verifier_pb2.Verdict, verifier_pb2.Receipt]] = []
        for chunk in chunks(requests, self.settings.batch_size):
            reply = await self._call(
                self._stubs().verifier.VerifyBatch,
                verifier_pb2.VerifyBatchRequest(items=chunk),
                idempotent=True,
            )
            out.extend((v, reply.receipt) for v in check_batch(chunk, reply, self.keys))
        return out

    async def verify_stream(
        self, items: Iterable[VerifyLike]
    ) -> AsyncIterator[verifier_pb2.Verdict]:
        """Stream responses through VerifyStream; see ``CertdClient.verify_stream``."""
        checker = StreamChecker(self.keys)
        requests = (checker.sent(verify_requests([item])[0]) for item in items)
        try:
            async for reply in self._stubs().verifier.VerifyStream(
                requests,
                timeout=self.settings.timeout_s,
                wait_for_ready=self.settings.wait_for_ready,
            ):
                for verdict in checker.received(reply):
                    yield verdict
        except grpc.RpcError as e:
            raise map_rpc_error(e) from e
        checker.finish()

    async def certify(
        self,
        task: TaskLike,
        label: str,
        witness: str,
        kappa: str = "",
        fields: Mapping[str, str] | None = None,
    ) -> authority_pb2.Certificate:
        """Ask for a feasibility certificate; see ``CertdClient.certify``."""
        req = certify_request(task, label, witness, kappa, fields)
        reply = await self._call(self._stubs().authority.Certify, req, idempotent=True)
        return check_certificate(reply.certificate, self.keys, req.task)

    async def certify_batch(
        self, items: Sequence[tuple[TaskLike, str, str]], kappa: str = ""
    ) -> list[authority_pb2.Certificate | CertificationRefusedError]:
        """Certify many triples; see ``CertdClient.certify_batch``."""
        requests = [certify_request(t, label, w, kappa) for t, label, w in items]
        out: list[authority_pb2.Certificate | CertificationRefusedError] = []
        for start in range(0, len(requests), self.settings.batch_size):
            chunk = requests[start : start + self.settings.batch_size]
            reply = await self._call(
                self._stubs().authority.CertifyBatch,
                authority_pb2.CertifyBatchRequest(items=chunk),
                idempotent=True,
            )
            for req, result in zip(chunk, reply.results, strict=True):
                if result.HasField("refusal"):
                    out.append(
                        CertificationRefusedError(
                            result.refusal.detail, reason=result.refusal.reason
                        )
                    )
                else:
                    out.append(check_certificate(result.certificate, self.keys, req.task))
        return out

    async def get_certificate(
        self, certificate_id: str | None = None, ledger_index: int | None = None
    ) -> authority_pb2.Certificate:
        """Fetch a certificate; see ``CertdClient.get_certificate``."""
        if certificate_id is not None:
            req = authority_pb2.GetCertificateRequest(certificate_id=certificate_id)
        else:
            req = authority_pb2.GetCertificateRequest(ledger_index=ledger_index or 0)
        return check_certificate(
            await self._call(self._stubs().authority.GetCertificate, req), self.keys
        )

    async def get_fork_tree(
        self, task: TaskLike, kappa: str = "", page_size: int = 0
    ) -> authority_pb2.ForkTree:
        """The certified families of a task; see ``CertdClient.get_fork_tree``."""
        pb = as_task(task)
        req = authority_pb2.GetForkTreeRequest(task=pb, kappa=kappa, page_size=page_size)
        tree = authority_pb2.ForkTree()
        while True:
            page: authority_pb2.ForkTree = await self._call(
                self._stubs().authority.GetForkTree, req
            )
            for cert in page.certificates:
                check_certificate(cert, self.keys, pb)
            tree.task_digest, tree.kappa = page.task_digest, page.kappa
            tree.certificates.extend(page.certificates)
            if not page.next_page_token:
                return tree
            req.page_token = page.next_page_token

    async def enumerate_families(self, task: TaskLike) -> authority_pb2.EnumerateFamiliesResponse:
        """Feasible labels and families; see ``CertdClient.enumerate_families``."""
        req = authority_pb2.EnumerateFamiliesRequest(task=as_task(task))
        reply: authority_pb2.EnumerateFamiliesResponse = await self._call(
            self._stubs().authority.EnumerateFamilies, req
        )
        return reply

    # Info

    async def server_info(self) -> info_pb2.ServerInfoResponse:
        """What the server serves: domains, κ names, verifier versions, limits, log key id."""
        reply: info_pb2.ServerInfoResponse = await self._call(
            self._stubs().info.ServerInfo, info_pb2.ServerInfoRequest()
        )
        return reply

    async def checkpoint(self) -> ledger_pb2.SignedCheckpoint:
        """The latest signed checkpoint."""
        reply: ledger_pb2.SignedCheckpoint = await self._call(
            self._stubs().ledger.GetCheckpoint, ledger_pb2.GetCheckpointRequest()
        )
        return reply

    async def entries(self, start: int, end: int) -> list[bytes]:
        """Entries [start, end), paging over the server's per-request limit."""
        out: list[bytes] = []
        while start + len(out) < end:
            req = ledger_pb2.GetEntriesRequest(start=start + len(out), end=end)
            page = (await self._call(self._stubs().ledger.GetEntries, req)).entries
            if not page:
                break
            out.extend(page)
        return out

    async def inclusion_proof(
        self, leaf_index: int, tree_size: int = 0
    ) -> ledger_pb2.InclusionProof:
        """An inclusion proof tied to a signed checkpoint."""
        req = ledger_pb2.GetInclusionProofRequest(leaf_index=leaf_index, tree_size=tree_size)
        reply: ledger_pb2.InclusionProof = await self._call(
            self._stubs().ledger.GetInclusionProof, req
        )
        return reply

    async def consistency_proof(
        self, first_size: int, second_size: int = 0
    ) -> ledger_pb2.ConsistencyProof:
        """A consistency proof between two tree sizes."""
        req = ledger_pb2.GetConsistencyProofRequest(first_size=first_size, second_size=second_size)
        reply: ledger_pb2.ConsistencyProof = await self._call(
            self._stubs().ledger.GetConsistencyProof, req
        )
        return reply

    async def key_rotations(self) -> list[dict[str, object]]:
        """The log's key rotations, oldest first, as ``CertdClient.key_rotations`` returns them
        (records for ``certd.keyrotation.open_rotation_record``; nothing trusted from here)."""
        req = ledger_pb2.GetKeyRotationsRequest()
        reply: ledger_pb2.GetKeyRotationsResponse = await self._call(
            self._stubs().ledger.GetKeyRotations, req
        )
        return rotation_records(reply)
