"""The Authority service: Certify, CertifyBatch, GetCertificate, GetForkTree, EnumerateFamilies,
and the acceptance RPCs (``certd.service.acceptance``)."""

from __future__ import annotations

import grpc

from certd.authority.acceptance import Acceptances
from certd.authority.checker import Checkers
from certd.authority.index import IndexedCertificate
from certd.authority.jobs import running
from certd.authority.policy import Authority, CertifyOutcome, CheckedTask, refuse
from certd.config import CertdConfig
from certd.errors import InvalidInputError, LimitExceededError, NotFoundError
from certd.ledger.log import Ledger
from certd.service.acceptance import AcceptanceMethods
from certd.service.convert import certificate_to_pb, checked_task, verdict_to_pb
from certd.service.handlers import rpc_job
from certd.service.paging import make_token, page_size, read_token
from certd.v1 import authority_pb2, authority_pb2_grpc, tasks_pb2

__all__ = ["AuthorityServicer"]


class AuthorityServicer(AcceptanceMethods, authority_pb2_grpc.AuthorityServicer):
    """Feasibility certificates, fork trees, family enumeration and acceptance certificates."""

    def __init__(
        self,
        cfg: CertdConfig,
        checkers: Checkers,
        authority: Authority,
        ledger: Ledger,
        acceptances: Acceptances,
    ) -> None:
        self._cfg = cfg
        self._checkers = checkers
        self._authority = authority
        self._ledger = ledger
        self._acceptances = acceptances

    def _request(
        self, request: authority_pb2.CertifyRequest, field: str
    ) -> tuple[CheckedTask, str, str]:
        """Validate one Certify request: (task, κ, label)."""
        if not request.label.value:
            raise InvalidInputError(
                f"{field}.label.value: expected a label, got none", field=f"{field}.label.value"
            )
        if not request.witness:
            raise InvalidInputError(
                f"{field}.witness: expected a witness, got none", field=f"{field}.witness"
            )
        task = checked_task(request.task, self._cfg, f"{field}.task")
        kappa = (
            request.label.kappa
            or self._authority.default_kappa(task)
            or self._checkers.for_domain(task.domain).kappa
        )
        return task, kappa, request.label.value

    @property
    def _shared(self) -> bool:
        """Whether other replicas append to the same ledger."""
        return self._ledger.store.shared

    def _cert(self, cert: IndexedCertificate | None) -> authority_pb2.Certificate:
        if cert is None:
            raise NotFoundError("certificate not found")
        return certificate_to_pb(self._ledger, cert)

    def Certify(
        self, request: authority_pb2.CertifyRequest, context: grpc.ServicerContext
    ) -> authority_pb2.CertifyResponse:
        task, kappa, label = self._request(request, "request")
        fields = dict(request.label.fields)
        with running(rpc_job(context)):  # the witness check stops if the RPC does
            outcome = self._authority.certify(task, kappa, label, request.witness, fields)
        refuse(outcome)
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
        submitted = []
        with running(rpc_job(context)):  # a cancelled batch's remaining checks stop at once
            for i, item in enumerate(request.items):
                task, kappa, label = self._request(item, f"items[{i}]")
                fields = dict(item.label.fields)
                submitted.append(self._authority.submit(task, kappa, label, item.witness, fields))
        outcomes = [self._authority.wait(s) for s in submitted]
        return authority_pb2.CertifyBatchResponse(results=[self._result(o) for o in outcomes])

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
        index = self._authority.index
        if which == "certificate_id":
            at = index.index_of(request.certificate_id)
            if at is None and self._shared:  # another replica's: catch up before NOT_FOUND
                index.catch_up(refresh=True)
                at = index.index_of(request.certificate_id)
            if at is None:
                raise NotFoundError(f"no certificate with id {request.certificate_id!r}")
        elif which == "ledger_index":
            at = request.ledger_index
            if at >= self._ledger.size() and self._shared:
                self._ledger.refresh()
            if at >= self._ledger.size():
                raise NotFoundError(f"ledger index {at} is not below size {self._ledger.size()}")
        else:
            raise InvalidInputError("key: expected certificate_id or ledger_index", field="key")
        cert = index.load(at)
        if cert is None:
            raise NotFoundError(f"ledger entry {at} is not a feasibility certificate")
        return self._cert(cert)

    def GetForkTree(
        self, request: authority_pb2.GetForkTreeRequest, context: grpc.ServicerContext
    ) -> authority_pb2.ForkTree:
        task = checked_task(request.task, self._cfg, "task")
        kappa = (
            request.kappa
            or self._authority.default_kappa(task)
            or self._checkers.for_domain(task.domain).kappa
        )
        index = self._authority.index
        if self._shared:  # labels other replicas certified count too
            index.catch_up(refresh=True)
        size = page_size(request.page_size, self._cfg.limits)
        query = f"forktree\n{task.digest}\n{kappa}"
        after = read_token(request.page_token, query)
        items = index.label_items(task.digest, kappa, after=after, limit=size + 1)
        page = items[:size]
        more = len(items) > size
        return authority_pb2.ForkTree(
            task_digest=task.digest,
            kappa=kappa,
            certificates=[self._cert(index.load(at)) for _, at in page],
            next_page_token=make_token(query, page[-1][0]) if more else "",
        )

    def EnumerateFamilies(
        self, request: authority_pb2.EnumerateFamiliesRequest, context: grpc.ServicerContext
    ) -> authority_pb2.EnumerateFamiliesResponse:
        task = checked_task(request.task, self._cfg, "task")
        checker = self._checkers.for_domain(task.domain)
        found = checker.enumerate(task.value)
        labels = [
            authority_pb2.FeasibleLabel(
                label=tasks_pb2.Label(
                    kappa=checker.kappa,
                    value=f"{lw.operand},{lw.operator}",
                    fields={"operand": str(lw.operand), "operator": lw.operator},
                ),
                witness=lw.witness,
            )
            for lw in found.labels
        ]
        return authority_pb2.EnumerateFamiliesResponse(
            kappa=checker.kappa,
            labels=labels,
            families=[authority_pb2.FamilyGroup(label_indexes=list(f)) for f in found.families],
            complete=found.complete,
            certifiable_families=found.certifiable,
        )
