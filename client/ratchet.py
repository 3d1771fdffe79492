"""The ratchet: training data gets in only with certificates that verify, offline.

Example::

    ratchet = Ratchet(trusted_keys=[vkey], kappas={"countdown.first-op.v1"},
                      consistency=client.consistency_proof_hashes)
    admission = ratchet.admit(record)        # a fork-tree record or a stratified group
    if not admission.admitted:
        print(admission.reasons)             # [("REPLAYED", "certificate is for task …"), …]

A record is ``{"task": {"domain": "countdown", "numbers": [...], "target": 83},
"families": [{"label": "25,-", "witness": "(25-5)*4+3", "certificate": {…}}, …]}`` where each
certificate is the protobuf JSON of ``certd.v1.Certificate`` (what ``forkgate certify --out``
writes). A record is admitted whole or not at all, when for every family:

* the certificate's DSSE envelope is signed by a trusted log key (``UNKNOWN_KEY`` when no
  trusted key has its key id, ``BAD_SIGNATURE`` when the signature does not verify);
* its statement is a feasibility certificate whose subjects agree with its predicate and the
  record's label (``WRONG_SUBJECT``), about this record's task (``REPLAYED`` when it is a valid
  certificate of another task), for this witness (``TAMPERED_WITNESS``), under a configured κ
  (``WRONG_KAPPA``);
* its inclusion proof verifies against a checkpoint signed by a trusted key (``BAD_PROOF``)
  that is consistent with the last checkpoint this ratchet trusted: one that forks from it is
  ``INCONSISTENT_CHECKPOINT``; an older one with no proof source to link it is
  ``STALE_CHECKPOINT``; a newer one with no proof source ``UNPROVEN_CHECKPOINT``. A newer
  consistent checkpoint becomes the trusted one.

And the task's certified coverage never shrinks: a record for a task must keep every family
admitted for that task before (``COVERAGE_SHRANK``).

Checkpoints move forward the same way: ``CheckpointRatchet.promote(digest, certificate)``
promotes a training checkpoint only with an acceptance certificate (docs/support-guard.md)
that verifies offline against the trusted keys, is about that checkpoint and run, is included
under a checkpoint consistent with the trusted one, and extends the chain of certificates this
ratchet promoted before (``BROKEN_CHAIN`` otherwise)::

    promoted = CheckpointRatchet([vkey], run="run-1").promote(weights_sha256, certificate)

A **stratified group** (a record with ``rollouts``; see ``Ratchet.admit_group``) is the
training unit keyed by (question, family): ``{"task": {…}, "family": "25,-", "rollouts":
[{"response": "…", "verdict": {…}, "receipt": {…}}, …]}``, optionally with the family's
``certificate`` and ``witness``. Each rollout's verdict receipt is checked like a certificate
(same key, signature, proof and checkpoint reasons), its verdict must be the one certd signed
for this task and response (``REPLAYED``, ``TAMPERED_WITNESS``, ``BAD_PROOF``) and carry the
group's family under a configured κ (``WRONG_SUBJECT``, ``WRONG_KAPPA``); a rollout is admitted
in one group only (``REPLAYED``).
With ``witness_quorum`` > 0 the ratchet also requires witnesses: every certificate's
checkpoint must be covered by the latest checkpoint fed to ``witness()`` that at least
``witness_quorum`` trusted witnesses cosigned (same size and root, or an older size proven
a prefix of it); otherwise ``UNWITNESSED_CHECKPOINT``. See ``forkgate.witness``.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from certd.errors import CertdError
from certd.ledger import merkle
from certd.ledger.checkpoint import Checkpoint, open_checkpoint
from certd.signing.dsse import Envelope, KeyRing, verify_envelope
from certd.signing.keys import VerifierKey
from certd.signing.statement import Statement, parse_statement
from certd.statements import (
    PREDICATE_FEASIBILITY,
    PREDICATE_VERDICT_RECEIPT,
    AcceptanceClaim,
    receipt_root_from_path,
    sha256_hex,
    task_digest,
    verdict_digest,
    verify_acceptance,
)
from certd.v1 import authority_pb2, ledger_pb2, tasks_pb2, verifier_pb2

from ._base import load_keyring
from .errors import ForkgateError, VerificationError
from .tasks import as_task
from .witness import load_witness_keys, open_witnessed

__all__ = [
    "Admission",
    "CertifiedDataset",
    "CheckpointRatchet",
    "Promotion",
    "Ratchet",
    "Reason",
    "TrustedCheckpoint",
]


class Reason(enum.StrEnum):
    """Why the ratchet refused a record."""

    MALFORMED = "MALFORMED"
    UNKNOWN_KEY = "UNKNOWN_KEY"
    BAD_SIGNATURE = "BAD_SIGNATURE"
    WRONG_SUBJECT = "WRONG_SUBJECT"
    REPLAYED = "REPLAYED"
    TAMPERED_WITNESS = "TAMPERED_WITNESS"
    WRONG_KAPPA = "WRONG_KAPPA"
    BAD_PROOF = "BAD_PROOF"
    STALE_CHECKPOINT = "STALE_CHECKPOINT"
    INCONSISTENT_CHECKPOINT = "INCONSISTENT_CHECKPOINT"
    UNPROVEN_CHECKPOINT = "UNPROVEN_CHECKPOINT"
    COVERAGE_SHRANK = "COVERAGE_SHRANK"
    NO_CERTIFICATE = "NO_CERTIFICATE"
    WRONG_CHECKPOINT = "WRONG_CHECKPOINT"
    WRONG_RUN = "WRONG_RUN"
    BROKEN_CHAIN = "BROKEN_CHAIN"
    UNWITNESSED_CHECKPOINT = "UNWITNESSED_CHECKPOINT"


@dataclass(frozen=True, slots=True)
class Admission:
    """The ratchet's decision on one record."""

    admitted: bool
    reasons: tuple[tuple[Reason, str], ...] = ()


@dataclass(frozen=True, slots=True)
class TrustedCheckpoint:
    """The checkpoint the ratchet trusts (size and root)."""

    size: int
    root_hash: bytes


class _Refused(Exception):  # internal control flow, never escapes the module
    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


ConsistencySource = Callable[[int, int], Sequence[bytes]]


@dataclass
class _Family:
    label: str
    witness: str
    certificate: authority_pb2.Certificate


class Ratchet:
    """Admits fork-tree records whose certificates verify against trusted keys.

    Args:
        trusted_keys: the log keys (vkey strings, files, VerifierKeys or a KeyRing).
        kappas: the κ name@versions accepted.
        consistency: returns the consistency proof between two tree sizes (e.g.
            ``lambda a, b: client.consistency_proof(a, b).hashes``); None admits only
            certificates proven at the trusted checkpoint (or the first one seen).
        trusted: a checkpoint to start from; None trusts the first valid one (TOFU).
        origin: the log origin the checkpoints must carry, or None for any.
        witness_keys: trusted witnesses' cosigner keys.
        witness_quorum: cosignatures required on a checkpoint (0: no witness needed).
    """

    def __init__(
        self,
        trusted_keys: KeyRing | Iterable[str | Path | VerifierKey],
        *,
        kappas: Collection[str],
        consistency: ConsistencySource | None = None,
        trusted: TrustedCheckpoint | None = None,
        origin: str | None = None,
        witness_keys: Iterable[str | Path | VerifierKey] = (),
        witness_quorum: int = 0,
    ) -> None:
        keys = load_keyring(trusted_keys)
        assert keys is not None
        self.keys = keys
        self.kappas = frozenset(kappas)
        self.consistency = consistency
        self.trusted = trusted
        self.origin = origin
        self.coverage: dict[str, frozenset[str]] = {}
        # (receipt envelope hash, index in its batch) -> the group it was admitted in
        self._rollouts: dict[tuple[bytes, int], bytes] = {}
        self.witness_keys = load_witness_keys(witness_keys)
        self.witness_quorum = witness_quorum
        if witness_quorum > len(self.witness_keys):
            raise VerificationError(
                f"witness quorum {witness_quorum} exceeds the {len(self.witness_keys)} "
                "trusted witness keys"
            )
        self.witnessed: TrustedCheckpoint | None = None

    def witness(self, note: str) -> TrustedCheckpoint:
        """Accept a checkpoint cosigned by a quorum of witnesses as the witnessed one.

        Args:
            note: the log's checkpoint with witness cosignature lines
                (``forkgate.witness.witnessed_checkpoint``).

        Raises:
            VerificationError: too few cosignatures, a bad signature, or the checkpoint is
                not consistent with the one witnessed before.

        Returns:
            The witnessed checkpoint.
        """
        cp = open_witnessed(note, self.keys, self.witness_keys, self.witness_quorum, self.origin)
        old = self.witnessed
        if old is not None and cp.size < old.size:
            return old
        if old is not None:
            try:
                if cp.size == old.size:
                    if cp.root_hash != old.root_hash:
                        raise _Refused(Reason.INCONSISTENT_CHECKPOINT, "two witnessed roots")
                else:
                    self._prove(old.size, old.root_hash, cp.size, cp.root_hash)
            except _Refused as e:
                raise VerificationError(f"witnessed checkpoint: {e.detail}") from e
        self.witnessed = TrustedCheckpoint(cp.size, cp.root_hash)
        return self.witnessed

    def _check_witnessed(self, cp: Checkpoint) -> None:
        if self.witness_quorum <= 0:
            return
        w = self.witnessed
        if w is None or cp.size > w.size:
            raise _Refused(
                Reason.UNWITNESSED_CHECKPOINT,
                f"checkpoint at size {cp.size} is not covered by a checkpoint cosigned by "
                f"{self.witness_quorum} witnesses"
                + ("" if w is None else f" (witnessed size {w.size})"),
            )
        if cp.size == w.size:
            if cp.root_hash != w.root_hash:
                raise _Refused(Reason.INCONSISTENT_CHECKPOINT, "root differs from the witnessed")
            return
        try:
            self._prove(cp.size, cp.root_hash, w.size, w.root_hash)
        except _Refused as e:
            raise _Refused(Reason.UNWITNESSED_CHECKPOINT, e.detail) from e

    def admit(self, record: Mapping[str, Any]) -> Admission:
        """Admit a fork-tree record or a stratified group whole, or refuse it with every reason.

        A record with ``rollouts`` is a stratified group (see ``admit_group``); any other is a
        fork-tree record.
        """
        if isinstance(record, Mapping) and "rollouts" in record:
            return self.admit_group(record)
        try:
            task, families = _parse(record)
        except _Refused as e:
            return Admission(False, ((e.reason, e.detail),))
        digest = task_digest(task)
        reasons: list[tuple[Reason, str]] = []
        checkpoints: list[Checkpoint] = []
        for fam in families:
            try:
                checkpoints.append(self._check(fam, digest))
            except _Refused as e:
                reasons.append((e.reason, f"family {fam.label!r}: {e.detail}"))
        labels = frozenset(f.label for f in families)
        lost = self.coverage.get(digest, frozenset()) - labels
        if lost:
            reasons.append(
                (Reason.COVERAGE_SHRANK, f"families admitted before are missing: {sorted(lost)}")
            )
        if not reasons:
            self._advance_all(checkpoints, reasons)
        if reasons:
            return Admission(False, tuple(reasons))
        self.coverage[digest] = self.coverage.get(digest, frozenset()) | labels
        return Admission(True)

    def admit_group(self, record: Mapping[str, Any]) -> Admission:
        """Admit a stratified group whole, or refuse it with every reason found.

        A group is ``{"task": {…}, "family": "25,-", "rollouts": [{"response": "…",
        "verdict": {…}, "receipt": {…}}, …]}`` with, optionally, ``"certificate"`` and
        ``"witness"``: the feasibility certificate of (task, family). Each verdict and receipt
        is the protobuf JSON certd returned (``certd.v1.Verdict``, ``certd.v1.Receipt``); a
        rollout may carry ``"task_sha256"``, the digest of the task it was verified against,
        so that a rollout moved from another task is named ``REPLAYED`` rather than
        ``TAMPERED_WITNESS``. Every rollout must be covered by a receipt that verifies like a
        certificate (trusted key, signature, inclusion proof, consistent checkpoint); its
        verdict digest must be the one recomputed from this task, its response and its
        verdict; its κ label must be the group's family under a configured κ. A rollout may
        appear in one group only (the same group again is admitted again). Groups leave the
        fork-tree coverage as it is.
        """
        try:
            task, family, rollouts, fam = _parse_group(record)
        except _Refused as e:
            return Admission(False, ((e.reason, e.detail),))
        digest = task_digest(task)
        reasons: list[tuple[Reason, str]] = []
        checkpoints: list[Checkpoint] = []
        if fam is not None:
            try:
                checkpoints.append(self._check(fam, digest))
            except _Refused as e:
                reasons.append((e.reason, f"certificate: {e.detail}"))
        receipts: dict[bytes, tuple[bytes, int] | _Refused] = {}
        keys: list[tuple[bytes, int]] = []
        for n, ro in enumerate(rollouts):
            try:
                keys.append(self._check_rollout(ro, digest, family, receipts, checkpoints))
            except _Refused as e:
                reasons.append((e.reason, f"rollout {n}: {e.detail}"))
        if len(set(keys)) != len(keys):
            reasons.append((Reason.REPLAYED, "a rollout appears twice in the group"))
        group_id = hashlib.sha256(
            json.dumps([digest, family, sorted((k.hex(), i) for k, i in keys)]).encode()
        ).digest()
        elsewhere = sum(1 for k in keys if self._rollouts.get(k, group_id) != group_id)
        if elsewhere:
            reasons.append(
                (Reason.REPLAYED, f"{elsewhere} rollouts were admitted in another group")
            )
        if not reasons:
            self._advance_all(checkpoints, reasons)
        if reasons:
            return Admission(False, tuple(reasons))
        for k in keys:
            self._rollouts[k] = group_id
        return Admission(True)

    def _check_rollout(
        self,
        ro: _Rollout,
        digest: str,
        family: str,
        receipts: dict[bytes, tuple[bytes, int] | _Refused],
        checkpoints: list[Checkpoint],
    ) -> tuple[bytes, int]:
        """Check one rollout; return its identity (receipt envelope hash, index in batch)."""
        receipt = ro.receipt
        env_hash = hashlib.sha256(receipt.envelope).digest()
        seen = receipts.get(env_hash)
        if seen is None:  # each receipt of the group is opened once
            try:
                seen = self._check_receipt(receipt)
                checkpoints.append(self._proven(receipt.envelope, receipt.inclusion))
            except _Refused as e:
                seen = e
            receipts[env_hash] = seen
        if isinstance(seen, _Refused):
            raise seen
        root, size = seen
        v = ro.verdict
        path = v.receipt_path
        if path.batch_size != size or receipt_root_from_path(v.digest, path) != root:
            raise _Refused(Reason.BAD_PROOF, "the verdict is not covered by its receipt")
        if verdict_digest(v, digest, ro.response) != v.digest:
            if (
                ro.task_sha256 != digest
                and ro.task_sha256
                and (verdict_digest(v, ro.task_sha256, ro.response) == v.digest)
            ):
                raise _Refused(Reason.REPLAYED, f"verdict is for task {ro.task_sha256[:16]}…")
            raise _Refused(
                Reason.TAMPERED_WITNESS,
                "the response or verdict does not match the digest its receipt covers",
            )
        if v.status == tasks_pb2.INFRA_ERROR:
            raise _Refused(Reason.MALFORMED, "an INFRA_ERROR verdict carries no reward")
        label = v.family.value if v.HasField("family") else ""
        if label != family:
            raise _Refused(Reason.WRONG_SUBJECT, f"verdict is for family {label!r}")
        if v.HasField("family") and v.family.kappa not in self.kappas:
            raise _Refused(Reason.WRONG_KAPPA, f"κ {v.family.kappa!r} is not configured")
        return env_hash, path.index

    def _check_receipt(self, receipt: verifier_pb2.Receipt) -> tuple[bytes, int]:
        """Open a verdict receipt; return its (batch root, batch size)."""
        statement = self._open(receipt.envelope, PREDICATE_VERDICT_RECEIPT)
        p = statement.predicate
        try:
            root, size = bytes.fromhex(str(p["batch_root"])), int(p["batch_size"])
        except (KeyError, TypeError, ValueError) as e:
            raise _Refused(Reason.WRONG_SUBJECT, f"receipt predicate: {e!r:.100}") from e
        if dict(statement.subjects).get("verdict-batch") != root.hex():
            raise _Refused(Reason.WRONG_SUBJECT, "receipt subject disagrees with its predicate")
        if receipt.batch_root != root or receipt.batch_size != size:
            raise _Refused(Reason.WRONG_SUBJECT, "receipt root or size differs from the signed one")
        return root, size

    def _open(self, envelope: bytes, predicate_type: str) -> Statement:
        """Verify an envelope against the trusted keys; return its statement."""
        try:
            env = Envelope.from_json(envelope)
        except CertdError as e:
            raise _Refused(Reason.MALFORMED, f"envelope: {e}") from e
        if not any(self.keys.lookup(sig.keyid) for sig in env.signatures):
            ids = ", ".join(sig.keyid for sig in env.signatures)
            raise _Refused(Reason.UNKNOWN_KEY, f"no trusted key has key id {ids}")
        try:
            statement = parse_statement(verify_envelope(env, self.keys))
        except CertdError as e:
            raise _Refused(Reason.BAD_SIGNATURE, str(e)) from e
        if statement.predicate_type != predicate_type:
            raise _Refused(Reason.WRONG_SUBJECT, f"predicate type {statement.predicate_type}")
        return statement

    def _proven(self, envelope: bytes, proof: ledger_pb2.InclusionProof) -> Checkpoint:
        """Check the envelope's inclusion proof and its checkpoint against the trusted one."""
        try:
            cp = open_checkpoint(proof.checkpoint.note, [t.key for t in self.keys], self.origin)
            if cp.size != proof.tree_size:
                raise _Refused(Reason.BAD_PROOF, "proof and checkpoint sizes differ")
            merkle.verify_inclusion(
                merkle.leaf_hash(envelope),
                proof.leaf_index,
                proof.tree_size,
                list(proof.hashes),
                cp.root_hash,
            )
        except CertdError as e:
            raise _Refused(Reason.BAD_PROOF, str(e)) from e
        self._check_witnessed(cp)
        self._compare(cp)
        return cp

    def _check(self, fam: _Family, digest: str) -> Checkpoint:
        cert = fam.certificate
        statement = self._open(cert.envelope, PREDICATE_FEASIBILITY)
        p = statement.predicate
        subjects = {name: d for name, d in statement.subjects}
        if subjects.get("task") != p.get("task_digest") or subjects.get("witness") != p.get(
            "witness_digest"
        ):
            raise _Refused(Reason.WRONG_SUBJECT, "subjects disagree with the predicate")
        if p.get("label") != fam.label:
            raise _Refused(Reason.WRONG_SUBJECT, f"certificate is for label {p.get('label')!r}")
        if p.get("kappa") not in self.kappas:
            raise _Refused(Reason.WRONG_KAPPA, f"κ {p.get('kappa')!r} is not configured")
        if p.get("task_digest") != digest:
            raise _Refused(
                Reason.REPLAYED, f"certificate is for task {str(p.get('task_digest'))[:16]}…"
            )
        if p.get("witness_digest") != sha256_hex(fam.witness.encode()):
            raise _Refused(Reason.TAMPERED_WITNESS, "witness does not match its digest")
        return self._proven(cert.envelope, cert.inclusion)

    def _advance_all(
        self, checkpoints: list[Checkpoint], reasons: list[tuple[Reason, str]]
    ) -> None:
        """Trust the record's checkpoints, oldest first; a refusal goes into ``reasons``."""
        try:
            for cp in sorted(checkpoints, key=lambda c: c.size):
                self._advance(cp)
        except _Refused as e:
            reasons.append((e.reason, e.detail))

    def _compare(self, cp: Checkpoint) -> None:
        """Refuse a checkpoint that forks from the trusted one, or is older and unprovable."""
        trusted = self.trusted
        if trusted is None:
            return
        if cp.size < trusted.size:
            if self.consistency is None:
                raise _Refused(
                    Reason.STALE_CHECKPOINT,
                    f"proof at tree size {cp.size}, older than the trusted size {trusted.size}, "
                    "and no consistency proof source",
                )
            self._prove(cp.size, cp.root_hash, trusted.size, trusted.root_hash)
            return
        if cp.size == trusted.size and cp.root_hash != trusted.root_hash:
            raise _Refused(
                Reason.INCONSISTENT_CHECKPOINT,
                f"root at size {cp.size} differs from the trusted root",
            )

    def _advance(self, cp: Checkpoint) -> None:
        """Move the trusted checkpoint forward after checking consistency."""
        trusted = self.trusted
        if trusted is None:
            self.trusted = TrustedCheckpoint(cp.size, cp.root_hash)
            return
        if cp.size <= trusted.size:  # older ones were proven a prefix in _compare
            return
        self._prove(trusted.size, trusted.root_hash, cp.size, cp.root_hash)
        self.trusted = TrustedCheckpoint(cp.size, cp.root_hash)

    def _prove(self, size1: int, root1: bytes, size2: int, root2: bytes) -> None:
        """Check that the tree at size1 is a prefix of the tree at size2."""
        if self.consistency is None:
            raise _Refused(
                Reason.UNPROVEN_CHECKPOINT, f"no consistency proof source for {size1} → {size2}"
            )
        try:
            proof = list(self.consistency(size1, size2))
            merkle.verify_consistency(size1, size2, proof, root1, root2)
        except CertdError as e:
            raise _Refused(
                Reason.INCONSISTENT_CHECKPOINT,
                f"tree size {size1} is not consistent with size {size2}: {e}",
            ) from e
        except ForkgateError as e:  # the proof source's transport failed
            raise _Refused(Reason.UNPROVEN_CHECKPOINT, f"consistency proof unavailable: {e}") from e


@dataclass(frozen=True, slots=True)
class Promotion:
    """The checkpoint ratchet's decision on one checkpoint."""

    promoted: bool
    reasons: tuple[tuple[Reason, str], ...] = ()
    claim: AcceptanceClaim | None = None


class CheckpointRatchet:
    """Promotes training checkpoints only with valid, chained acceptance certificates.

    Args:
        trusted_keys: the log keys (vkey strings, files, VerifierKeys or a KeyRing).
        run: the training run whose chain this follows.
        head: the certificate id of the last promoted certificate ("" for none yet: the first
            certificate must then be the run's first, with no predecessor).
        consistency: consistency proof source, as for ``Ratchet``.
        trusted: a log checkpoint to start from; None trusts the first valid one.
        origin: the log origin the checkpoints must carry, or None for any.
    """

    def __init__(
        self,
        trusted_keys: KeyRing | Iterable[str | Path | VerifierKey],
        *,
        run: str,
        head: str = "",
        consistency: ConsistencySource | None = None,
        trusted: TrustedCheckpoint | None = None,
        origin: str | None = None,
    ) -> None:
        self.run = run
        self.head = head
        self.promoted: list[AcceptanceClaim] = []
        self._log = Ratchet(
            trusted_keys, kappas=(), consistency=consistency, trusted=trusted, origin=origin
        )

    @property
    def trusted(self) -> TrustedCheckpoint | None:
        """The log checkpoint this ratchet trusts."""
        return self._log.trusted

    def promote(
        self, checkpoint_digest: str, certificate: authority_pb2.AcceptanceCertificate | None
    ) -> Promotion:
        """Promote the checkpoint with this digest, or refuse with every reason found."""
        if certificate is None or not certificate.envelope:
            return Promotion(False, ((Reason.NO_CERTIFICATE, "no acceptance certificate"),))
        keys = self._log.keys
        try:
            env = Envelope.from_json(certificate.envelope)
        except CertdError as e:
            return Promotion(False, ((Reason.MALFORMED, f"envelope: {e}"),))
        if not any(keys.lookup(sig.keyid) for sig in env.signatures):
            ids = ", ".join(sig.keyid for sig in env.signatures)
            return Promotion(False, ((Reason.UNKNOWN_KEY, f"no trusted key has key id {ids}"),))
        try:
            claim = verify_acceptance(certificate, keys, origin=self._log.origin)
        except CertdError as e:
            reason = (
                Reason.BAD_PROOF if "proof" in type(e).__name__.lower() else Reason.BAD_SIGNATURE
            )
            return Promotion(False, ((reason, str(e)),))
        reasons: list[tuple[Reason, str]] = []
        if claim.checkpoint_digest != checkpoint_digest:
            reasons.append(
                (
                    Reason.WRONG_CHECKPOINT,
                    f"certificate is for checkpoint {claim.checkpoint_digest[:16]}…, "
                    f"expected {checkpoint_digest[:16]}…",
                )
            )
        if claim.run != self.run:
            reasons.append((Reason.WRONG_RUN, f"certificate is for run {claim.run!r}"))
        if claim.predecessor != self.head:
            reasons.append(
                (
                    Reason.BROKEN_CHAIN,
                    f"predecessor: expected {self.head[:16] or '(none)'}, "
                    f"got {claim.predecessor[:16] or '(none)'}",
                )
            )
        cp = None
        try:
            cp = open_checkpoint(
                certificate.inclusion.checkpoint.note, [t.key for t in keys], self._log.origin
            )
            self._log._compare(cp)
        except CertdError as e:
            reasons.append((Reason.BAD_PROOF, str(e)))
        except _Refused as e:
            reasons.append((e.reason, e.detail))
        if not reasons and cp is not None:
            try:
                self._log._advance(cp)
            except _Refused as e:
                reasons.append((e.reason, e.detail))
        if reasons:
            return Promotion(False, tuple(reasons), claim)
        self.head = claim.certificate_id
        self.promoted.append(claim)
        return Promotion(True, (), claim)


def _parse(record: Mapping[str, Any]) -> tuple[tasks_pb2.Task, list[_Family]]:
    try:
        task = as_task(record["task"])
        families = []
        for fam in record["families"]:
            cert = authority_pb2.Certificate()
            json_format.ParseDict(fam["certificate"], cert)
            families.append(_Family(str(fam["label"]), str(fam["witness"]), cert))
    except (KeyError, TypeError, ValueError, json_format.ParseError) as e:
        raise _Refused(Reason.MALFORMED, f"record: {e!r:.200}") from e
    if not families:
        raise _Refused(Reason.MALFORMED, "record has no families")
    return task, families


@dataclass
class _Rollout:
    response: str
    verdict: verifier_pb2.Verdict
    receipt: verifier_pb2.Receipt
    task_sha256: str


def _parse_group(
    record: Mapping[str, Any],
) -> tuple[tasks_pb2.Task, str, list[_Rollout], _Family | None]:
    try:
        task = as_task(record["task"])
        family = str(record["family"])
        rollouts = []
        receipts: dict[str, verifier_pb2.Receipt] = {}  # a batch's rollouts share one receipt
        for ro in record["rollouts"]:
            verdict = verifier_pb2.Verdict()
            json_format.ParseDict(ro["verdict"], verdict)
            text = json.dumps(ro["receipt"], sort_keys=True)
            receipt = receipts.get(text)
            if receipt is None:
                receipt = receipts[text] = verifier_pb2.Receipt()
                json_format.ParseDict(ro["receipt"], receipt)
            rollouts.append(
                _Rollout(str(ro["response"]), verdict, receipt, str(ro.get("task_sha256", "")))
            )
        fam = None
        if record.get("certificate") is not None:
            cert = authority_pb2.Certificate()
            json_format.ParseDict(record["certificate"], cert)
            fam = _Family(family, str(record["witness"]), cert)
    except (KeyError, TypeError, ValueError, json_format.ParseError) as e:
        raise _Refused(Reason.MALFORMED, f"group: {e!r:.200}") from e
    if not rollouts:
        raise _Refused(Reason.MALFORMED, "group has no rollouts")
    return task, family, rollouts, fam


@dataclass
class CertifiedDataset:
    """Fork-tree records and stratified groups filtered through a ratchet.

    Iterating yields only the admitted records.

    Example::

        data = CertifiedDataset.from_jsonl(Path("forktrees.jsonl"), ratchet)
        for record in data: ...
        data.refused   # [(line number, Admission), ...]
    """

    records: Iterable[Mapping[str, Any]]
    ratchet: Ratchet
    refused: list[tuple[int, Admission]] = field(default_factory=list)

    @classmethod
    def from_jsonl(cls, path: Path, ratchet: Ratchet) -> CertifiedDataset:
        """Records from a JSONL file (one record a line)."""

        def lines() -> Iterator[Mapping[str, Any]]:
            with path.open(encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        try:
                            yield json.loads(line)
                        except ValueError:
                            yield {"malformed": line[:100]}

        return cls(lines(), ratchet)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        for n, record in enumerate(self.records):
            admission = self.ratchet.admit(record)
            if admission.admitted:
                yield record
            else:
                self.refused.append((n, admission))

    def rows(self) -> Iterator[dict[str, Any]]:
        """Flat rows of the admitted records: the training-side view.

        One row per family of a fork-tree record (``kind`` ``"witness"``, reward 1.0, status
        ``CORRECT``) and one per rollout of a stratified group (``kind`` ``"rollout"``, the
        verdict's reward and status). Columns: ``kind``, ``task_digest``, ``task`` (JSON),
        ``label``, ``witness`` (the witness or the rollout's response), ``reward``,
        ``status``, ``forced``, ``certificate`` (the feasibility certificate's protobuf JSON
        as a string, "" for a group without one), ``receipt`` and ``verdict`` (protobuf JSON
        strings for rollouts, "" for witnesses), so the schema is fixed.
        """
        for record in self:
            task = json.dumps(record["task"], sort_keys=True)
            digest = task_digest(as_task(record["task"]))
            if "rollouts" in record:
                cert = record.get("certificate")
                for ro in record["rollouts"]:
                    verdict = verifier_pb2.Verdict()
                    json_format.ParseDict(ro["verdict"], verdict)
                    yield {
                        "kind": "rollout",
                        "task_digest": digest,
                        "task": task,
                        "label": str(record["family"]),
                        "witness": str(ro["response"]),
                        "reward": float(verdict.reward),
                        "status": tasks_pb2.VerdictStatus.Name(verdict.status),
                        "forced": False,
                        "certificate": json.dumps(cert, sort_keys=True) if cert else "",
                        "receipt": json.dumps(ro["receipt"], sort_keys=True),
                        "verdict": json.dumps(ro["verdict"], sort_keys=True),
                    }
                continue
            for fam in record["families"]:
                yield {
                    "kind": "witness",
                    "task_digest": digest,
                    "task": task,
                    "label": str(fam["label"]),
                    "witness": str(fam["witness"]),
                    "reward": 1.0,
                    "status": "CORRECT",
                    "forced": bool(fam.get("forced", False)),
                    "certificate": json.dumps(fam["certificate"], sort_keys=True),
                    "receipt": "",
                    "verdict": "",
                }

    def to_hf(self) -> Any:
        """The admitted rows as a Hugging Face ``datasets.Dataset`` (needs ``datasets``).

        Raises:
            ImportError: ``datasets`` is not installed (it comes with the ``train`` extra).
        """
        import datasets

        return datasets.Dataset.from_list(list(self.rows()))
