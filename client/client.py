"""The synchronous certd client.

Example::

    from forkgate import CertdClient
    with CertdClient("127.0.0.1:50051", trusted_keys=["certd-data/signing.pub"]) as c:
        task = {"numbers": [25, 5, 4, 3], "target": 83}
        verdicts = c.verify_batch([(task, "<answer>(25-5)*4+3</answer>", "r1")])
        cert = c.certify(task, "25,-", "(25-5)*4+3")

With ``trusted_keys`` every receipt, verdict and certificate is checked offline before it is
returned; a mismatch raises ``VerificationError``. A client inherited through ``fork()`` (a
DataLoader worker) connects again in the child on its first call there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import grpc

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
from .errors import CertificationRefusedError
from .tasks import TaskLike, as_task
from .verdicts import TypedVerdict

if TYPE_CHECKING:  # signing loads only when receipts are checked (start-up time)
    from certd.signing.dsse import KeyRing
    from certd.signing.keys import VerifierKey

__all__ = ["CertdClient"]

T = TypeVar("T")


class CertdClient:
    """A blocking client for certd's Verifier, Authority and Ledger services.

    Args:
        address: ``host:port`` of certd, or the ``IP:port`` of several replicas (a list or
            a comma-separated string), balanced round-robin with failover.
        trusted_keys: log keys to check receipts and certificates against (vkey strings,
            files holding one, VerifierKeys or a KeyRing); None skips offline checks.
        settings: deadlines, retries, batch size.
        tls_ca: CA file of certd's TLS certificate (TLS on); None for plaintext (loopback).
        tls_cert: client certificate file for mutual TLS, with ``tls_key``.
        tls_key: the client certificate's private key file.
        token: a bearer token (needs TLS).
        tls_server_name: the name to check certd's certificate against (one of its SANs)
            instead of the address; needed with TLS over several replica addresses.

    After ``fork()`` (a PyTorch DataLoader worker, a ``multiprocessing`` child) the child's
    first call builds a new channel from the same target, options and credentials: gRPC does
    not support a channel made before the fork in the child (grpc/grpc
    ``doc/fork_support.md``). The parent's channel is left as it is, in both processes.
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
        self._spec = channel_spec(
            address,
            self.settings,
            tls_ca=tls_ca,
            tls_cert=tls_cert,
            tls_key=tls_key,
            token=token,
            tls_server_name=tls_server_name,
        )
        self._connect()

    def __enter__(self) -> CertdClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel this process built (one inherited through ``fork()`` is left to
        the parent; see ``_stubs``)."""
        if self._channel_pid == os.getpid():
            self._channel.close()

    def _connect(self) -> None:
        """Build the channel and its stubs from ``self._spec``; this process owns them."""
        spec = self._spec
        if spec.credentials is None:
            self._channel = grpc.insecure_channel(spec.target, options=spec.options)
        else:
            self._channel = grpc.secure_channel(spec.target, spec.credentials, options=spec.options)
        self._channel_stubs = Stubs.on(self._channel)
        self._channel_pid = os.getpid()

    def _stubs(self) -> Stubs:
        """The stubs every call goes through: this process's, built anew after a ``fork()``.

        One ``os.getpid()`` per call tells a child process from the one that built the channel.
        """
        if self._channel_pid != os.getpid():
            # The inherited channel is dropped, never closed: close() would run gRPC's teardown
            # of calls and connections that belong to the parent (state whose threads did not
            # survive the fork, sockets the parent may still use), which can hang the child or
            # cut the parent's connection. The parent keeps using its own channel untouched.
            self._connect()
        return self._channel_stubs

    def _call(self, fn: Callable[..., T], request: object, idempotent: bool = False) -> T:
        """One call; gRPC retries its attempts as the channel's service config says
        (``forkgate._retry``). ``idempotent`` sends an idempotency key with every attempt."""
        try:
            return fn(
                request,
                timeout=self.settings.timeout_s,
                metadata=call_metadata(idempotent),
                wait_for_ready=self.settings.wait_for_ready,
            )
        except grpc.RpcError as e:
            raise map_rpc_error(e) from e

    # Verifier

    def verify(self, task: TaskLike, response: str, id: str = "") -> TypedVerdict:
        """Check one response.

        Raises:
            ForkgateError: a typed error for each failure (see ``forkgate.errors``).

        Returns:
            The verdict, typed (``v.status is Status.CORRECT``, ``v.family``; the protobuf is
            ``v.pb``), checked against its receipt when trusted keys are set.
        """
        return self.verify_batch([VerifyItem(task, response, id)])[0]

    def verify_batch(self, items: Iterable[VerifyLike]) -> list[TypedVerdict]:
        """Check many responses, ``settings.batch_size`` per VerifyBatch call, in order.

        Raises:
            ForkgateError: a typed error for each failure.

        Returns:
            The verdicts, typed (``forkgate.verdicts``), in request order.
        """
        return [TypedVerdict.of(v) for v in self.verify_batch_pb(items)]

    def verify_pb(self, task: TaskLike, response: str, id: str = "") -> verifier_pb2.Verdict:
        """``verify`` returning certd's protobuf ``Verdict`` (for JSON output, receipts).

        Raises:
            ForkgateError: as ``verify``.
        """
        return self.verify_batch_pb([VerifyItem(task, response, id)])[0]

    def verify_batch_pb(self, items: Iterable[VerifyLike]) -> list[verifier_pb2.Verdict]:
        """``verify_batch`` returning certd's protobuf ``Verdict`` messages, in order.

        Raises:
            ForkgateError: as ``verify_batch``.
        """
        return [verdict for verdict, _ in self.verify_batch_receipted(items)]

    def verify_typed(self, task: TaskLike, response: str, id: str = "") -> TypedVerdict:
        """The same as ``verify`` (kept for callers written before it was typed).

        Raises:
            ForkgateError: as ``verify``.
        """
        return self.verify(task, response, id)

    def verify_batch_typed(self, items: Iterable[VerifyLike]) -> list[TypedVerdict]:
        """The same as ``verify_batch`` (kept for callers written before it was typed).

        Raises:
            ForkgateError: as ``verify_batch``.
        """
        return self.verify_batch(items)

    def verify_batch_receipted(
        self, items: Iterable[VerifyLike]
    ) -> list[tuple[verifier_pb2.Verdict, verifier_pb2.Receipt]]:
        """``verify_batch`` that keeps each verdict's receipt (for stratified group records).

        Raises:
            ForkgateError: a typed error for each failure.

        Returns:
            (verdict, the receipt covering it), in request order.
        """
        requests = verify_requests(items)
        out: list[tuple[verifier_pb2.Verdict, verifier_pb2.Receipt]] = []
        for chunk in chunks(requests, self.settings.batch_size):
            reply = self._call(
                self._stubs().verifier.VerifyBatch,
                verifier_pb2.VerifyBatchRequest(items=chunk),
                idempotent=True,
            )
            out.extend((v, reply.receipt) for v in check_batch(chunk, reply, self.keys))
        return out

    def verify_stream(self, items: Iterable[VerifyLike]) -> Iterator[verifier_pb2.Verdict]:
        """Stream responses through VerifyStream; yield verdicts in order.

        Requests go out as ``items`` yields them, so this fits a sampler that produces
        responses over time. With trusted keys each verdict is yielded once its group's receipt
        verified (groups close every ``stream_receipt_every`` verdicts on the server and at the
        end). A stream is not retried: a failure raises and the caller decides.

        Raises:
            ForkgateError: a typed error for each failure.
        """
        checker = StreamChecker(self.keys)
        requests = (checker.sent(r) for r in _requests_one_by_one(items))
        try:
            replies = self._stubs().verifier.VerifyStream(
                requests,
                timeout=self.settings.timeout_s,
                wait_for_ready=self.settings.wait_for_ready,
            )
            for reply in replies:
                yield from checker.received(reply)
        except grpc.RpcError as e:
            raise map_rpc_error(e) from e
        checker.finish()

    # Authority

    def certify(
        self,
        task: TaskLike,
        label: str,
        witness: str,
        kappa: str = "",
        fields: Mapping[str, str] | None = None,
    ) -> authority_pb2.Certificate:
        """Ask for a feasibility certificate for (task, label) with a witness.

        ``fields`` are the claimed label's fields (certd recomputes the label and ignores them;
        the learned κ applies the model the operator recorded with ``certd kappa-fit``).

        Raises:
            CertificationRefusedError: the witness is wrong, carries another label, is a
                pseudo-fork of a certified label, or no learned-κ model is recorded
                (``reason`` says which).
            ForkgateError: other typed failures.

        Returns:
            The certificate (the existing one when (task, label) was certified before).
        """
        req = certify_request(task, label, witness, kappa, fields)
        reply = self._call(self._stubs().authority.Certify, req, idempotent=True)
        return check_certificate(reply.certificate, self.keys, req.task)

    def certify_batch(
        self, items: Sequence[tuple[TaskLike, str, str]], kappa: str = ""
    ) -> list[authority_pb2.Certificate | CertificationRefusedError]:
        """Certify many (task, label, witness) triples; refusals come back as values.

        Raises:
            ForkgateError: a failure of the call itself.
        """
        requests = [certify_request(t, label, w, kappa) for t, label, w in items]
        out: list[authority_pb2.Certificate | CertificationRefusedError] = []
        for start in range(0, len(requests), self.settings.batch_size):
            chunk = requests[start : start + self.settings.batch_size]
            reply = self._call(
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

    def get_certificate(
        self, certificate_id: str | None = None, ledger_index: int | None = None
    ) -> authority_pb2.Certificate:
        """Fetch a certificate by id or ledger index, with a fresh inclusion proof.

        Raises:
            NotFoundError: no such certificate.
        """
        if certificate_id is not None:
            req = authority_pb2.GetCertificateRequest(certificate_id=certificate_id)
        else:
            req = authority_pb2.GetCertificateRequest(ledger_index=ledger_index or 0)
        return check_certificate(self._call(self._stubs().authority.GetCertificate, req), self.keys)

    def get_fork_tree(
        self, task: TaskLike, kappa: str = "", page_size: int = 0
    ) -> authority_pb2.ForkTree:
        """The certified families of a task, every page of them (each certificate checked
        when keys are set).

        Args:
            task: the task.
            kappa: the κ; "" for the domain's default.
            page_size: certificates per call (0: the server's default).
        """
        pb = as_task(task)
        req = authority_pb2.GetForkTreeRequest(task=pb, kappa=kappa, page_size=page_size)
        tree = authority_pb2.ForkTree()
        while True:
            page: authority_pb2.ForkTree = self._call(self._stubs().authority.GetForkTree, req)
            for cert in page.certificates:
                check_certificate(cert, self.keys, pb)
            tree.task_digest, tree.kappa = page.task_digest, page.kappa
            tree.certificates.extend(page.certificates)
            if not page.next_page_token:
                return tree
            req.page_token = page.next_page_token

    def enumerate_families(self, task: TaskLike) -> authority_pb2.EnumerateFamiliesResponse:
        """Every feasible label of a task with a witness, and the pseudo-fork families."""
        req = authority_pb2.EnumerateFamiliesRequest(task=as_task(task))
        reply: authority_pb2.EnumerateFamiliesResponse = self._call(
            self._stubs().authority.EnumerateFamilies, req
        )
        return reply

    # Info

    def server_info(self) -> info_pb2.ServerInfoResponse:
        """What the server serves: domains, κ names, verifier versions, limits, log key id."""
        reply: info_pb2.ServerInfoResponse = self._call(
            self._stubs().info.ServerInfo, info_pb2.ServerInfoRequest()
        )
        return reply

    # Ledger

    def checkpoint(self) -> ledger_pb2.SignedCheckpoint:
        """The latest signed checkpoint."""
        reply: ledger_pb2.SignedCheckpoint = self._call(
            self._stubs().ledger.GetCheckpoint, ledger_pb2.GetCheckpointRequest()
        )
        return reply

    def entries(self, start: int, end: int) -> list[bytes]:
        """Entries [start, end), paging over the server's per-request limit."""
        out: list[bytes] = []
        while start + len(out) < end:
            req = ledger_pb2.GetEntriesRequest(start=start + len(out), end=end)
            page = self._call(self._stubs().ledger.GetEntries, req).entries
            if not page:
                break
            out.extend(page)
        return out

    def inclusion_proof(self, leaf_index: int, tree_size: int = 0) -> ledger_pb2.InclusionProof:
        """An inclusion proof tied to a signed checkpoint (the latest when size 0)."""
        req = ledger_pb2.GetInclusionProofRequest(leaf_index=leaf_index, tree_size=tree_size)
        reply: ledger_pb2.InclusionProof = self._call(self._stubs().ledger.GetInclusionProof, req)
        return reply

    def consistency_proof(
        self, first_size: int, second_size: int = 0
    ) -> ledger_pb2.ConsistencyProof:
        """A consistency proof between two tree sizes (the latest when second is 0)."""
        req = ledger_pb2.GetConsistencyProofRequest(first_size=first_size, second_size=second_size)
        reply: ledger_pb2.ConsistencyProof = self._call(
            self._stubs().ledger.GetConsistencyProof, req
        )
        return reply

    def key_rotations(self) -> list[dict[str, object]]:
        """The log's key rotations (``certd rotate-key``), oldest first, each as the record
        ``--trust key-rotation-R.json`` takes: the entry with its inclusion in the last
        checkpoint the outgoing key signed. Nothing is trusted from here:
        ``certd.keyrotation.open_rotation_record(record, ring)`` verifies one against the keys
        you trust (``certd.keyrotation.follow`` then moves them onto the new key)."""
        req = ledger_pb2.GetKeyRotationsRequest()
        reply: ledger_pb2.GetKeyRotationsResponse = self._call(
            self._stubs().ledger.GetKeyRotations, req
        )
        return rotation_records(reply)


def _requests_one_by_one(items: Iterable[VerifyLike]) -> Iterator[verifier_pb2.VerifyRequest]:
    for item in items:
        yield verify_requests([item])[0]
