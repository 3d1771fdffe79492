"""The ratchet: training data gets in only with certificates that verify, offline.

Example::

    ratchet = Ratchet(trusted_keys=[vkey], kappas={"countdown.first-op.v1"},
                      consistency=client.consistency_proof_hashes)
    admission = ratchet.admit(record)        # a fork-tree record (see below)
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

With ``witness_quorum`` > 0 the ratchet also requires witnesses: every certificate's
checkpoint must be covered by the latest checkpoint fed to ``witness()`` that at least
``witness_quorum`` trusted witnesses cosigned (same size and root, or an older size proven
a prefix of it); otherwise ``UNWITNESSED_CHECKPOINT``. See ``forkgate.witness``.
"""

from __future__ import annotations

import enum
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
from certd.signing.statement import parse_statement
from certd.statements import PREDICATE_FEASIBILITY, sha256_hex, task_digest
from certd.v1 import authority_pb2, tasks_pb2

from ._base import load_keyring
from .errors import ForkgateError, VerificationError
from .tasks import as_task
from .witness import load_witness_keys, open_witnessed

__all__ = ["Admission", "CertifiedDataset", "Ratchet", "Reason", "TrustedCheckpoint"]


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
        """Admit a fork-tree record whole, or refuse it with every reason found."""
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
            try:
                for cp in sorted(checkpoints, key=lambda c: c.size):
                    self._advance(cp)
            except _Refused as e:
                reasons.append((e.reason, e.detail))
        if reasons:
            return Admission(False, tuple(reasons))
        self.coverage[digest] = self.coverage.get(digest, frozenset()) | labels
        return Admission(True)

    def _check(self, fam: _Family, digest: str) -> Checkpoint:
        cert = fam.certificate
        try:
            env = Envelope.from_json(cert.envelope)
        except CertdError as e:
            raise _Refused(Reason.MALFORMED, f"envelope: {e}") from e
        if not any(self.keys.lookup(sig.keyid) for sig in env.signatures):
            ids = ", ".join(sig.keyid for sig in env.signatures)
            raise _Refused(Reason.UNKNOWN_KEY, f"no trusted key has key id {ids}")
        try:
            statement = parse_statement(verify_envelope(env, self.keys))
        except CertdError as e:
            raise _Refused(Reason.BAD_SIGNATURE, str(e)) from e
        if statement.predicate_type != PREDICATE_FEASIBILITY:
            raise _Refused(Reason.WRONG_SUBJECT, f"predicate type {statement.predicate_type}")
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
        proof = cert.inclusion
        try:
            cp = open_checkpoint(proof.checkpoint.note, [t.key for t in self.keys], self.origin)
            if cp.size != proof.tree_size:
                raise _Refused(Reason.BAD_PROOF, "proof and checkpoint sizes differ")
            merkle.verify_inclusion(
                merkle.leaf_hash(cert.envelope),
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
class CertifiedDataset:
    """Fork-tree records filtered through a ratchet: iterating yields only admitted ones.

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
        """One flat row per admitted family: the training-side view of the fork trees.

        Columns: ``task_digest``, ``task`` (JSON), ``label``, ``witness``, ``forced``,
        ``certificate`` (the certificate's protobuf JSON, as a string, so the schema is fixed).
        """
        for record in self:
            task = json.dumps(record["task"], sort_keys=True)
            digest = task_digest(as_task(record["task"]))
            for fam in record["families"]:
                yield {
                    "task_digest": digest,
                    "task": task,
                    "label": str(fam["label"]),
                    "witness": str(fam["witness"]),
                    "forced": bool(fam.get("forced", False)),
                    "certificate": json.dumps(fam["certificate"], sort_keys=True),
                }

    def to_hf(self) -> Any:
        """The admitted rows as a Hugging Face ``datasets.Dataset`` (needs ``datasets``).

        Raises:
            ImportError: ``datasets`` is not installed (it comes with the ``train`` extra).
        """
        import datasets

        return datasets.Dataset.from_list(list(self.rows()))
