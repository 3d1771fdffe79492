"""The certification policy: verify the witness, recompute its label, pass the gate, sign, log.

Example (see tests/integration for a running server)::

    authority = Authority(checkers, ledger, signer, clock=time.time)
    outcome = authority.certify(task, "countdown.first-op.v1", "25,-", "(25-5)*4+3")
    outcome.index, outcome.existing

A Certify for a (task, κ, label) certified before returns that certificate. A witness that is the
same solution (same canonical form) as one certified under another label of the same task is
refused as a pseudo-fork. Nothing is returned before its ledger entry is durable.

Across replicas sharing one ledger: each decision first indexes what other replicas appended,
and the ledger key ``feasibility/<task>/<κ>/<label>`` is unique in the store, so when two
replicas certify the same (task, κ, label) at once, the store takes one entry and the other
replica returns that certificate as ``existing``. On a shared store the entry also claims the
key ``canonical/<task>/<κ>/<canonical digest>`` in the same atomic append, so two replicas
cannot certify one solution under two labels at once: the loser's request is refused as a
pseudo-fork.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from certd.authority.checker import Checkers, DomainTask
from certd.authority.index import CertificateIndex, IndexedCertificate
from certd.domains.verdict import Family, Status, Verdict
from certd.errors import CertdError, CertificationRefusedError
from certd.ledger.log import Ledger
from certd.ledger.store import KEY_SEPARATOR, DuplicateKeyError
from certd.signing.dsse import sign_envelope
from certd.signing.keys import SigningKey
from certd.signing.statement import IN_TOTO_PAYLOAD_TYPE, make_statement
from certd.statements import PREDICATE_FEASIBILITY, feasibility_predicate
from certd.v1 import tasks_pb2

if TYPE_CHECKING:
    from certd.authority.learned import LearnedLabeller

__all__ = ["Authority", "CertifyOutcome", "CheckedTask", "Refusal", "refuse"]


@dataclass(frozen=True, slots=True)
class CheckedTask:
    """A task converted from the wire once: its message, digest, domain and domain value."""

    pb: tasks_pb2.Task
    digest: str
    domain: str
    value: DomainTask


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a Certify was refused."""

    reason: str
    detail: str
    verdict: Verdict | None = None


@dataclass(frozen=True, slots=True)
class CertifyOutcome:
    """A durable certificate, or a refusal."""

    certificate: IndexedCertificate | None = None
    existing: bool = False
    refusal: Refusal | None = None


@dataclass(frozen=True, slots=True)
class _Pending:
    """A certificate decided and submitted, waiting for its group commit."""

    cert: IndexedCertificate
    future: Future[IndexedCertificate]
    existing: bool = False


def _refusal(reason: str, detail: str, verdict: Verdict | None = None) -> CertifyOutcome:
    return CertifyOutcome(refusal=Refusal(reason, detail, verdict))


CATCH_UP_INTERVAL_S = 0.5
"""On a shared ledger, how often Certify indexes what other replicas appended."""


class Authority:
    """Issues feasibility certificates.

    Thread-safe: decisions for one task are serialised by a striped lock; the ledger write
    happens outside the lock, and a concurrent request for the same (task, label) waits on the
    same pending write instead of issuing a second certificate.
    """

    _STRIPES = 64

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
        self._learned = learned  # the learned κ (certd.authority.learned), if configured
        self._ledger = ledger
        self._signer = signer
        self._clock = clock
        self._index = CertificateIndex(ledger)
        self._locks = [threading.Lock() for _ in range(self._STRIPES)]
        self._pending: dict[tuple[str, str, str], _Pending] = {}
        self._pending_canonical: dict[tuple[str, str, str], str] = {}  # → label

    @property
    def index(self) -> CertificateIndex:
        """The certificate index (task → κ → label)."""
        return self._index

    def _lock(self, task_digest: str) -> threading.Lock:
        return self._locks[int(task_digest[:8], 16) % self._STRIPES]

    def default_kappa(self, task: CheckedTask) -> str:
        """The κ the task's configured set chose (``learned_kappa.task_sets``), or ""."""
        if self._learned is None:
            return ""
        checker = self._checkers.for_domain(task.domain)
        return self._learned.default_kappa(task.digest, task.domain, checker.kappas)

    def submit(
        self,
        task: CheckedTask,
        kappa: str,
        label: str,
        witness: str,
        fields: Mapping[str, str] | None = None,
    ) -> _Pending | CertifyOutcome:
        """Decide a Certify and submit its ledger entry; see ``certify``.

        Returns:
            A pending write to wait on, or an outcome decided without writing.
        """
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
        if learned is not None:  # the label depends on the question's recorded clusters
            try:
                labelled = learned.label(
                    task.digest,
                    task.domain,
                    kappa,
                    witness,
                    fields or {},
                    self._index,
                    verify=lambda rs: [
                        v.status is Status.CORRECT
                        for v in checker.verify_batch([(task.value, r) for r in rs])
                    ],
                )
            except CertificationRefusedError as e:
                return _refusal(e.reason, str(e), verdict)
            family = labelled.family
            verdict = replace(verdict, canonical=labelled.canonical)
        got = family.label if family is not None else ""
        if got != label:
            return _refusal(
                "LABEL_MISMATCH", f"label: claimed {label!r}, witness carries {got!r}", verdict
            )
        key = (task.digest, kappa, label)
        cert = self._draft(task, kappa, label, witness, verdict, family)
        if self._ledger.store.shared:
            # Catching up here only saves a write for a label another replica certified:
            # the store's unique keys refuse it anyway (``wait``). At most every
            # CATCH_UP_INTERVAL_S, so replicas do not each parse every entry per request.
            self._index.catch_up(min_interval_s=CATCH_UP_INTERVAL_S)
        with self._lock(task.digest):
            pending = self._pending.get(key)
            if pending is not None:
                return _Pending(pending.cert, pending.future, existing=True)
            existing = self._index.get(*key)
            if existing is not None:
                return CertifyOutcome(certificate=existing, existing=True)
            clash = self._index.label_for_canonical(task.digest, kappa, cert.canonical_digest)
            clash = clash or self._pending_canonical.get(
                (task.digest, kappa, cert.canonical_digest)
            )
            if clash is not None:
                return _refusal(
                    "PSEUDO_FORK",
                    f"the witness is the same solution as the one certified for label {clash!r} "
                    "(commuted or re-associated); not a new family",
                    verdict,
                )
            pending = _Pending(cert, Future())
            self._pending[key] = pending
            self._pending_canonical[(task.digest, kappa, cert.canonical_digest)] = label
        # The ledger write happens outside the lock: a full group-commit queue may block here.
        ledger_key = CertificateIndex.key(*key)
        if self._ledger.store.shared:  # one atomic append claims the canonical solution too
            ledger_key += KEY_SEPARATOR + CertificateIndex.canonical_key(
                task.digest, kappa, cert.canonical_digest
            )
        try:
            written = self._ledger.submit(ledger_key, cert.envelope)
        except CertdError as e:
            pending.future.set_exception(e)
            self._settle(key, pending)
            raise
        written.add_done_callback(lambda f: self._settle(key, pending, f))
        return pending

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

    def _settle(
        self, key: tuple[str, str, str], pending: _Pending, written: Future[int] | None = None
    ) -> None:
        """Move a pending certificate into the index once its write settled (or failed)."""
        if written is not None:
            error = written.exception()
            if error is None:
                placed = pending.cert.with_index(written.result())
                with self._lock(key[0]):
                    self._index.add(placed)
                    self._forget(key, pending)
                pending.future.set_result(placed)
                return
            pending.future.set_exception(error)
        with self._lock(key[0]):
            self._forget(key, pending)

    def _forget(self, key: tuple[str, str, str], pending: _Pending) -> None:
        """Drop a settled pending certificate (caller holds the task's lock)."""
        self._pending.pop(key, None)
        self._pending_canonical.pop((key[0], key[1], pending.cert.canonical_digest), None)

    def wait(
        self, outcome: _Pending | CertifyOutcome, timeout_s: float | None = None
    ) -> CertifyOutcome:
        """Wait until a submitted certificate is durable.

        Raises:
            LedgerError: the ledger write failed (nothing was certified).
        """
        if isinstance(outcome, CertifyOutcome):
            return outcome
        try:
            cert = outcome.future.result(timeout=timeout_s)
        except DuplicateKeyError as e:
            if e.index is None:
                raise
            # Another replica got there first: the same (task, κ, label) -> return its
            # certificate; the same solution under another label -> a pseudo-fork.
            self._ledger.cover(e.index)
            stored = self._index.load(e.index)
            mine = outcome.cert
            if stored is None or (stored.task_digest, stored.kappa) != (
                mine.task_digest,
                mine.kappa,
            ):
                raise
            self._index.add(stored)
            if stored.label == mine.label:
                return CertifyOutcome(certificate=stored, existing=True)
            if stored.canonical_digest == mine.canonical_digest:
                return _refusal(
                    "PSEUDO_FORK",
                    f"the witness is the same solution as the one certified for label "
                    f"{stored.label!r} (commuted or re-associated); not a new family",
                )
            raise
        existing = outcome.existing or cert.envelope != outcome.cert.envelope
        return CertifyOutcome(certificate=cert, existing=existing)

    def certify(
        self,
        task: CheckedTask,
        kappa: str,
        label: str,
        witness: str,
        fields: Mapping[str, str] | None = None,
    ) -> CertifyOutcome:
        """Certify that ``label`` is a feasible family of ``task`` with ``witness``.

        ``fields`` are the claimed label's fields; only the learned κ reads them (the first
        steps of a question's rollouts, for its first certificate).

        Raises:
            LedgerError: the ledger write failed.
            InvalidInputError: the learned κ's steps are malformed.

        Returns:
            The certificate (``existing`` when certified before) or a refusal.
        """
        return self.wait(self.submit(task, kappa, label, witness, fields))


def refuse(outcome: CertifyOutcome) -> None:
    """Raise the refusal of an outcome as a typed error (for unary Certify).

    Raises:
        CertificationRefusedError: the outcome is a refusal.
    """
    if outcome.refusal is not None:
        raise CertificationRefusedError(outcome.refusal.detail, reason=outcome.refusal.reason)
