"""The Authority service: Certify, CertifyBatch, GetCertificate, GetForkTree, EnumerateFamilies,
and the acceptance RPCs (``certd.service.acceptance_rpcs``).

Each RPC validates, calls the authority once and encodes: Certify is ``Authority.certify_one``
(κ resolved, a refusal raised inside), CertifyBatch one ``certify_batch``, GetForkTree one
``fork_tree`` (its page token checked against the κ the page carries). Tasks convert through
the ``TaskCache`` the Verifier service shares. The servicer reads no ledger: every certificate
comes back from the authority with its inclusion proof (``Proven``), and it only encodes it.
"""

from __future__ import annotations

import grpc

from certd.authority.acceptances import Acceptances
from certd.authority.feasibility import (
    Authority,
    CertifyOutcome,
    CertifyRequest,
)
from certd.authority.jobs import running
from certd.authority.quota import LedgerQuota
from certd.authority.results import IndexedCertificate, Proven
from certd.config import CertdConfig
from certd.errors import InvalidInputError, LimitExceededError
from certd.service.acceptance_rpcs import AcceptanceMethods
from certd.service.access import client_of
from certd.service.convert import certificate_to_pb, verdict_to_pb
from certd.service.handlers import rpc_job
from certd.service.paging import check_token, make_token, open_token, page_size
from certd.service.taskcache import TaskCache
from certd.v1 import authority_pb2, authority_pb2_grpc, tasks_pb2

__all__ = ["AuthorityServicer"]


class AuthorityServicer(AcceptanceMethods, authority_pb2_grpc.AuthorityServicer):
    """Feasibility certificates, fork trees, family enumeration and acceptance certificates."""

    def __init__(
        self,
        cfg: CertdConfig,
        authority: Authority,
        acceptances: Acceptances,
        quota: LedgerQuota | None = None,
        tasks: TaskCache | None = None,
    ) -> None:
        self._quota = quota or LedgerQuota.from_config(cfg.limits)
        self._cfg = cfg
        self._tasks = tasks or TaskCache(cfg)
        self._authority = authority
        self._acceptances = acceptances

    def _request(self, request: authority_pb2.CertifyRequest, field: str) -> CertifyRequest:
        """Validate one Certify request (its κ as asked: the authority resolves an empty one)."""
        if not request.label.value:
            raise InvalidInputError(
                f"{field}.label.value: expected a label, got none", field=f"{field}.label.value"
            )
        if not request.witness:
            raise InvalidInputError(
                f"{field}.witness: expected a witness, got none", field=f"{field}.witness"
            )
        return CertifyRequest(
            task=self._tasks.get(request.task, f"{field}.task"),
            kappa=request.label.kappa,
            label=request.label.value,
            witness=request.witness,
            fields=dict(request.label.fields),
        )

    @staticmethod
    def _cert(cert: Proven[IndexedCertificate] | None) -> authority_pb2.Certificate:
        assert cert is not None  # a durable certificate: the outcome is not a refusal
        return certificate_to_pb(cert)

    def Certify(
        self, request: authority_pb2.CertifyRequest, context: grpc.ServicerContext
    ) -> authority_pb2.CertifyResponse:
        r = self._request(request, "request")
        principal = client_of(context)
        self._quota.admit(principal)
        with running(rpc_job(context)):  # the witness check stops if the RPC does
            outcome = self._authority.certify_one(r)  # a refusal raises: nothing to charge
        self._charge(principal, [outcome])
        return authority_pb2.CertifyResponse(
            certificate=self._cert(outcome.certificate), existing=outcome.existing
        )

    def CertifyBatch(
        self, request: authority_pb2.CertifyBatchRequest, context: grpc.ServicerContext
    ) -> authority_pb2.CertifyBatchResponse:
        limit = self._cfg.limits.max_certify_batch_items
        if len(request.items) > limit:
            raise LimitExceededError(
                f"items: at most {limit} per batch, got {len(request.items)}", field="items"
            )
        requests = [self._request(item, f"items[{i}]") for i, item in enumerate(request.items)]
        principal = client_of(context)
        self._quota.admit(principal)
        with running(rpc_job(context)):  # a cancelled batch's remaining checks stop at once
            outcomes = self._authority.certify_batch(requests)
        self._charge(principal, outcomes)
        return authority_pb2.CertifyBatchResponse(results=[self._result(o) for o in outcomes])

    def _charge(self, principal: str, outcomes: list[CertifyOutcome]) -> None:
        """Count the certificates these outcomes added to the ledger against the quota."""
        new = [
            o.certificate.value.envelope
            for o in outcomes
            if o.certificate is not None and not o.existing
        ]
        self._quota.charge(principal, entries=len(new), nbytes=sum(len(e) for e in new))

    def _result(self, outcome: CertifyOutcome) -> authority_pb2.CertifyResult:
        if outcome.refusal is not None:
            r = outcome.refusal
            verdict = verdict_to_pb(r.verdict, "", 0.0) if r.verdict is not None else None
            return authority_pb2.CertifyResult(
                refusal=authority_pb2.Refusal(reason=r.reason, detail=r.detail, verdict=verdict)
            )
        return authority_pb2.CertifyResult(
            certificate=self._cert(outcome.certificate), existing=outcome.existing
        )

    def GetCertificate(
        self, request: authority_pb2.GetCertificateRequest, context: grpc.ServicerContext
    ) -> authority_pb2.Certificate:
        which = request.WhichOneof("key")
        if which == "certificate_id":
            cert = self._authority.certificate(certificate_id=request.certificate_id)
        elif which == "ledger_index":
            cert = self._authority.certificate(ledger_index=request.ledger_index)
        else:
            raise InvalidInputError("key: expected certificate_id or ledger_index", field="key")
        return self._cert(cert)

    def GetForkTree(
        self, request: authority_pb2.GetForkTreeRequest, context: grpc.ServicerContext
    ) -> authority_pb2.ForkTree:
        task = self._tasks.get(request.task, "task")
        size = page_size(request.page_size, self._cfg.limits)
        token = open_token(request.page_token)
        after = token.after if token is not None else None
        page = self._authority.fork_tree(task, request.kappa, after=after, limit=size)
        query = f"forktree\n{task.digest}\n{page.kappa}"  # the κ the authority resolved
        check_token(token, query)
        more = page.next_after is not None
        return authority_pb2.ForkTree(
            task_digest=page.task_digest,
            kappa=page.kappa,
            certificates=[self._cert(c) for c in page.certificates],
            next_page_token=make_token(query, page.next_after or "") if more else "",
        )

    def EnumerateFamilies(
        self, request: authority_pb2.EnumerateFamiliesRequest, context: grpc.ServicerContext
    ) -> authority_pb2.EnumerateFamiliesResponse:
        task = self._tasks.get(request.task, "task")
        found = self._authority.enumerate(task)
        return authority_pb2.EnumerateFamiliesResponse(
            kappa=found.kappa,
            labels=[
                authority_pb2.FeasibleLabel(
                    label=tasks_pb2.Label(kappa=found.kappa, value=f.label, fields=f.fields),
                    witness=f.witness,
                )
                for f in found.labels
            ],
            families=[authority_pb2.FamilyGroup(label_indexes=list(f)) for f in found.families],
            complete=found.complete,
            certifiable_families=found.certifiable,
        )
