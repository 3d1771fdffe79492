"""Feasibility certificates: verify the witness, recompute its label, pass the gate, sign, log.

Example (see tests/integration for a running server)::

    authority = Authority(checkers, ledger, signer, clock=time.time)
    outcome = authority.certify(task, "countdown.first-op.v1", "25,-", "(25-5)*4+3")
    outcome.certificate.value.index, outcome.existing  # and .checkpoint, .proof

A Certify for a (task, κ, label) certified before returns that certificate. A witness that is the
same solution (same canonical form) as one certified under another label of the same task is
refused as a pseudo-fork. Nothing is returned before its ledger entry is durable.

The ledger keeps the two uniqueness facts the gate rests on, also across replicas sharing one
ledger (``certd.ledger.certificates``): one certificate per (task, κ, label), returned again as
``existing``; one label per canonical solution of a (task, κ), which the authority refuses as a
pseudo-fork. A Certify makes one ledger call to record, ``CertificateLog.record``, and one to
prove what is durable, ``Ledger.prove_many`` (one checkpoint for a whole CertifyBatch): every
certificate the authority returns carries its inclusion proof (``Proven``), and the reads
(``certificate``, ``fork_tree``) return proven certificates too, so the service encodes
replies without reading the ledger.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from certd.authority.checker import Checkers, FamilyCounts
from certd.authority.counting import SignedCounts
from certd.authority.results import (
    CertifyOutcome,
    CertifyRequest,
    CheckedTask,
    Families,
    FeasibleLabel,
    ForkTreePage,
    Proven,
    Refusal,
    proven,
)
from certd.authority.verifypool import VerifyPool
from certd.domains.verdict import Family, Status, Verdict
from certd.errors import CertificationRefusedError
from certd.ledger.certificates import CertificateLog, PendingRecord, Recorded, Taken
from certd.ledger.certindex import CertificateIndex, IndexedCertificate
from certd.ledger.log import Ledger
from certd.opening import PREDICATE_FEASIBILITY
from certd.payloads import feasibility_predicate
from certd.signing.dsse import sign_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, make_statement
from certd.signing.keys import SigningKey

if TYPE_CHECKING:
    from certd.authority.labeller import LearnedLabeller

__all__ = [
    "Authority",
    "CertifyOutcome",
    "CertifyRequest",
    "CheckedTask",
    "Families",
    "FeasibleLabel",
    "ForkTreePage",
    "Proven",
    "Refusal",
    "refuse",
]

_ENUMERATED_CACHE = 4096
"""Tasks whose enumeration (EnumerateFamilies) is kept (signed counts: ``SignedCounts``)."""

_Cached = TypeVar("_Cached")

RECORD_CHUNK = 128
"""CertifyBatch hands decided certificates to the ledger this many at a time."""


def _refusal(reason: str, detail: str, verdict: Verdict | None = None) -> CertifyOutcome:
    return CertifyOutcome(refusal=Refusal(reason, detail, verdict))


def _pseudo_fork(label: str, verdict: Verdict | None) -> CertifyOutcome:
    return _refusal(
        "PSEUDO_FORK",
        f"the witness is the same solution as the one certified for label {label!r} "
        "(commuted or re-associated); not a new family",
        verdict,
    )


@dataclass(frozen=True, slots=True)
class _Submitted:
    """A certificate decided and handed to the ledger, waiting for its group commit."""

    record: PendingRecord
    verdict: Verdict


class Authority:
    """Issues feasibility certificates and answers what is certified.

    Thread-safe. A Certify is decided here (witness verdict, recomputed label, the learned κ)
    and recorded in one ledger call (``CertificateLog.record``), which keeps a concurrent
    request for the same (task, κ, label) waiting on the same write; what it returns carries
    its inclusion proof (one ``Ledger.prove_many`` per request).
    """

    def __init__(
        self,
        checkers: Checkers,
        ledger: Ledger,
        signer: SigningKey,
        *,
        clock: Callable[[], float] = time.time,
        learned: LearnedLabeller | None = None,
    ) -> None:
        self._checkers = checkers
        self._learned = learned  # the learned κ (certd.authority.labeller), if configured
        self._signer = signer
        self._clock = clock
        self._ledger = ledger
        self._certificates = CertificateLog(ledger)
        self._enumerated: dict[str, Families | None] = {}  # by task digest; None: cannot
        self._counts = SignedCounts(checkers)  # the signed feasible counts, by (task, κ)
        self._enumerated_lock = threading.Lock()

    def count_in(self, pool: VerifyPool) -> None:
        """Count a CertifyBatch's new tasks of the pool's domain in its worker processes while
        the batch is checked (the same checker and counts; ``certd.authority.counting``)."""
        self._counts.use_pool(pool)

    @property
    def index(self) -> CertificateIndex:
        """The certificate index (task → κ → label), read by the learned κ."""
        return self._certificates.index

    def default_kappa(self, task: CheckedTask) -> str:
        """The κ the task's configured set chose (``learned_kappa.task_sets``), or ""."""
        if self._learned is None:
            return ""
        checker = self._checkers.for_domain(task.domain)
        return self._learned.default_kappa(task.digest, task.domain, checker.kappas)

    def kappa_for(self, task: CheckedTask, requested: str = "") -> str:
        """The κ a request means: the one it names, else its task set's, else the domain's."""
        return requested or self.default_kappa(task) or self._checkers.for_domain(task.domain).kappa

    # -- certify ----------------------------------------------------------------------------

    def certify(
        self,
        task: CheckedTask,
        kappa: str,
        label: str,
        witness: str,
        fields: Mapping[str, str] | None = None,
    ) -> CertifyOutcome:
        """Certify that ``label`` is a feasible family of ``task`` with ``witness``.

        ``fields`` are the claimed label's fields; nothing reads them (the learned κ applies
        the model the operator recorded, whatever a request carries).

        Raises:
            LedgerError: the ledger write failed.
            InvalidInputError: a math task has no question (``CheckedTask.require_identity``).

        Returns:
            The certificate with its inclusion proof (``existing`` when certified before) or a
            refusal.
        """
        task.require_identity("certify")
        request = CertifyRequest(task, kappa, label, witness, dict(fields or {}))
        return self._prove([self._wait(self._submit(request))])[0]

    def certify_one(self, request: CertifyRequest) -> CertifyOutcome:
        """One Certify RPC: the κ resolved (``kappa_for``: an empty one is the task set's or
        the domain's), the certificate issued, a refusal raised.

        Raises:
            CertificationRefusedError: the request is refused (its reason and detail).
            UnsupportedError: the task's domain is not served here.
            LedgerError, InvalidInputError: as ``certify``.

        Returns:
            The certificate with its inclusion proof (``existing`` when certified before).
        """
        kappa = self.kappa_for(request.task, request.kappa)
        r = request
        outcome = self.certify(r.task, kappa, r.label, r.witness, r.fields)
        refuse(outcome)
        return outcome

    def certify_batch(self, requests: Sequence[CertifyRequest]) -> list[CertifyOutcome]:
        """Certify each request, in order (a request's empty κ resolved by ``kappa_for``).

        Decided certificates go to the ledger ``RECORD_CHUNK`` at a time (one group-commit
        request each), so the ledger commits while later items are checked; a request under
        the learned κ, whose label reads what is recorded, is recorded on its own after every
        certificate before it. Nothing is returned before every certificate is durable; then
        every one is proven in the same checkpoint, in one call. The signed counts of the
        batch's new tasks are computed meanwhile in the verify pool's workers (``count_in``).

        Raises:
            LedgerError: a ledger write failed.
            InvalidInputError: a math task has no question (``CheckedTask.require_identity``).
            UnsupportedError: a task's domain is not served here.

        Returns:
            One outcome per request (a certificate with its inclusion proof, or a refusal).
        """
        requests = [self._resolved(r) for r in requests]
        for request in requests:
            request.task.require_identity("certify")
        with self._counts.prefetch([(r.task, r.kappa) for r in requests]):
            submitted = self._submit_all(requests)
        return self._prove([self._wait(s) for s in submitted])

    def _submit_all(self, requests: Sequence[CertifyRequest]) -> list[_Submitted | CertifyOutcome]:
        """Decide each request and hand the certificates to the ledger (``certify_batch``)."""
        submitted: list[_Submitted | CertifyOutcome | None] = []  # None: not recorded yet
        drafts: list[tuple[int, IndexedCertificate, Verdict]] = []
        for request in requests:
            learned = self._learned is not None and self._learned.owns(request.kappa)
            if learned:
                self._record(drafts, submitted)
            decided = self._decide(request)
            if isinstance(decided, CertifyOutcome):
                submitted.append(decided)
                continue
            drafts.append((len(submitted), *decided))
            submitted.append(None)
            if learned or len(drafts) >= RECORD_CHUNK:
                self._record(drafts, submitted)
        self._record(drafts, submitted)
        assert all(s is not None for s in submitted)  # every draft was recorded
        return [s for s in submitted if s is not None]

    def _resolved(self, request: CertifyRequest) -> CertifyRequest:
        """The request with its κ resolved (``kappa_for``)."""
        kappa = self.kappa_for(request.task, request.kappa)
        return request if kappa == request.kappa else replace(request, kappa=kappa)

    def _record(
        self,
        drafts: list[tuple[int, IndexedCertificate, Verdict]],
        submitted: list[_Submitted | CertifyOutcome | None],
    ) -> None:
        """Hand the decided certificates to the ledger in one call; empties ``drafts``."""
        if not drafts:
            return
        records = self._certificates.record_many([cert for _, cert, _ in drafts])
        for (at, _, verdict), record in zip(drafts, records, strict=True):
            submitted[at] = _Submitted(record, verdict)
        drafts.clear()

    def _submit(self, request: CertifyRequest) -> _Submitted | CertifyOutcome:
        """Decide a Certify and hand its certificate to the ledger (the one ledger call)."""
        decided = self._decide(request)
        if isinstance(decided, CertifyOutcome):
            return decided
        cert, verdict = decided
        return _Submitted(self._certificates.record(cert), verdict)

    def _decide(
        self, request: CertifyRequest
    ) -> tuple[IndexedCertificate, Verdict] | CertifyOutcome:
        """Verify the witness, recompute its label, sign the certificate; or a refusal."""
        task, kappa, label, witness = request.task, request.kappa, request.label, request.witness
        checker = self._checkers.for_domain(task.domain)
        learned = self._learned if self._learned and self._learned.owns(kappa) else None
        if learned is None and kappa not in checker.kappas:
            return _refusal(
                "KAPPA_UNKNOWN", f"κ: expected one of {', '.join(checker.kappas)}, got {kappa!r}"
            )
        verdict = checker.verify(task.value, witness, canonical=True)
        if verdict.status is not Status.CORRECT:
            return _refusal(
                "WITNESS_NOT_CORRECT",
                f"witness verdict: expected CORRECT, got {verdict.status.name}: {verdict.detail}",
                verdict,
            )
        family = verdict.label_for(kappa)
        if learned is not None:  # the label applies the model the operator recorded
            try:
                labelled = learned.label(task.digest, task.domain, kappa, witness, self._ledger)
            except CertificationRefusedError as e:
                return _refusal(e.reason, str(e), verdict)
            family = labelled.family
            verdict = replace(verdict, canonical=labelled.canonical)
        got = family.label if family is not None else ""
        if got != label:
            return _refusal(
                "LABEL_MISMATCH", f"label: claimed {label!r}, witness carries {got!r}", verdict
            )
        return self._draft(task, kappa, label, witness, verdict, family), verdict

    def _draft(
        self,
        task: CheckedTask,
        kappa: str,
        label: str,
        witness: str,
        verdict: Verdict,
        family: Family | None,
    ) -> IndexedCertificate:
        """Build and sign the certificate for a verified witness."""
        fields = family.fields if family is not None else {}
        predicate = feasibility_predicate(
            task=task.pb,
            kappa=kappa,
            label=label,
            label_fields=fields,
            witness=witness,
            canonical=verdict.canonical,
            verifier=verdict.verifier,
            issued_at=int(self._clock()),
            task_sha256=task.digest,
            feasible=self._feasible(task, kappa),
        )
        statement = make_statement(
            [("task", task.digest), ("witness", str(predicate["witness_digest"]))],
            PREDICATE_FEASIBILITY,
            predicate,
        )
        return IndexedCertificate(
            index=-1,
            task_digest=task.digest,
            kappa=kappa,
            label=label,
            label_fields=dict(fields),
            canonical_digest=str(predicate["canonical_digest"]),
            witness=witness,
            envelope=sign_envelope(statement, IN_TOTO_PAYLOAD_TYPE, self._signer).to_json(),
        )

    def _feasible(self, task: CheckedTask, kappa: str) -> dict[str, Any] | None:
        """The enumeration counts certd signs into the certificate (its coverage denominator),
        for a domain that enumerates under ``kappa``: those of the enumeration ``enumerate``
        served for the task when cached, else the domain's ``count_families`` (the same
        counts without rendering witnesses), once per (task, κ) (``SignedCounts``)."""
        checker = self._checkers.for_domain(task.domain)
        if kappa != checker.kappa:
            return None
        with self._enumerated_lock:
            served = self._enumerated.get(task.digest)
        if served is not None:
            counts: FamilyCounts | None = FamilyCounts(
                labels=len({lw.label for lw in served.labels}),
                families=len(served.families),
                complete=bool(served.complete),
            )
        else:
            counts = self._counts.get(task, kappa)
        if counts is None or not counts.labels:
            return None
        return {"complete": counts.complete, "families": counts.families, "labels": counts.labels}

    def _remember(self, cache: dict[str, _Cached], digest: str, value: _Cached) -> None:
        with self._enumerated_lock:
            if len(cache) >= _ENUMERATED_CACHE:
                cache.pop(next(iter(cache)))
            cache[digest] = value

    @staticmethod
    def _wait(submitted: _Submitted | CertifyOutcome) -> Recorded | CertifyOutcome:
        """Wait until a submitted certificate is durable (a refusal passes through).

        Raises:
            LedgerError: the ledger write failed (nothing was certified).
        """
        if isinstance(submitted, CertifyOutcome):
            return submitted
        result = submitted.record.result()
        if isinstance(result, Taken):
            return _pseudo_fork(result.label, submitted.verdict)
        assert isinstance(result, Recorded)
        return result

    def _prove(self, done: Sequence[Recorded | CertifyOutcome]) -> list[CertifyOutcome]:
        """The outcomes, every durable certificate with its inclusion proof (one ledger call).

        Raises:
            NotFoundError: a certificate is not covered by the latest checkpoint.
            StoreError: the store failed.
        """
        recorded = [d.certificate for d in done if isinstance(d, Recorded)]
        certs = iter(proven(self._ledger, recorded))
        return [
            CertifyOutcome(certificate=next(certs), existing=d.existing)
            if isinstance(d, Recorded)
            else d
            for d in done
        ]

    # -- reads ------------------------------------------------------------------------------

    def certificate(
        self, *, certificate_id: str | None = None, ledger_index: int | None = None
    ) -> Proven[IndexedCertificate]:
        """A certificate by its id (hex SHA-256 of its envelope) or its ledger index, with its
        inclusion proof in the latest checkpoint.

        Raises:
            NotFoundError: no such certificate.
            StoreError: the store failed.
        """
        if certificate_id is not None:
            cert = self._certificates.by_id(certificate_id)
        else:
            assert ledger_index is not None, "expected a certificate id or a ledger index"
            cert = self._certificates.at(ledger_index)
        return proven(self._ledger, [cert])[0]

    def fork_tree(
        self, task: CheckedTask, kappa: str, *, after: str | None = None, limit: int | None = None
    ) -> ForkTreePage:
        """The certified families of (task, κ) in label order, a page at a time, each with its
        inclusion proof (all in the latest checkpoint).

        Args:
            task: the task.
            kappa: the κ (an empty one: ``kappa_for``'s; the page says which).
            after: the last label of the previous page, or None.
            limit: the page size, or None for every label.

        Raises:
            StoreError: the store failed.
            InvalidInputError: a math task without a question.
            UnsupportedError: the task's domain is not served here.
        """
        kappa = self.kappa_for(task, kappa)
        task.require_identity("a fork tree")
        more = None if limit is None else limit + 1
        found = self._certificates.labels(task.digest, kappa, after=after, limit=more)
        page = found[:limit] if limit is not None else found
        next_after = page[-1].label if limit is not None and len(found) > limit else None
        return ForkTreePage(task.digest, kappa, proven(self._ledger, page), next_after)

    def enumerate(self, task: CheckedTask) -> Families:
        """Every feasible label of a task under its domain's κ, with witnesses and families.

        Raises:
            UnsupportedError: the domain cannot enumerate its families.
            LimitExceededError: the task is over the enumeration limits.
        """
        with self._enumerated_lock:
            cached = self._enumerated.get(task.digest)
        if cached is not None:
            return cached
        checker = self._checkers.for_domain(task.domain)
        found = checker.enumerate(task.value)
        families = Families(
            kappa=checker.kappa,
            labels=[FeasibleLabel(lw.label, lw.fields, lw.witness) for lw in found.labels],
            families=[tuple(f) for f in found.families],
            complete=found.complete,
            certifiable=found.certifiable,
        )
        self._remember(self._enumerated, task.digest, families)
        return families


def refuse(outcome: CertifyOutcome) -> None:
    """Raise the refusal of an outcome as a typed error (for unary Certify).

    Raises:
        CertificationRefusedError: the outcome is a refusal.
    """
    if outcome.refusal is not None:
        raise CertificationRefusedError(outcome.refusal.detail, reason=outcome.refusal.reason)
