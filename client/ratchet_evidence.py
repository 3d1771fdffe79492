"""The ratchet's evidence checks: a record's certificates and a group's receipts and verdicts,
opened against the trusted log keys, each failure a ``Refused`` with its reason.

Example:
    >>> out = Outcome()
    >>> out.refuse(Refused(Reason.WRONG_KAPPA, "κ 'x.v1' is not configured"), "family '25,-': ")
    >>> [(reason.value, detail) for reason, detail in out.reasons]
    [('WRONG_KAPPA', "family '25,-': κ 'x.v1' is not configured")]

Pure: no I/O. The checks note the log checkpoints the evidence is tied to in an ``Outcome``;
fitting those to the trusted state is the ratchet's (``forkgate.ratchet``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from certd.errors import CertdError
from certd.signing.dsse import KeyRing
from certd.statements import (
    FeasibilityClaim,
    open_log_checkpoint,
    receipt_root_from_path,
    sha256_hex,
    verdict_digest,
    verify_certificate,
    verify_receipt,
)
from certd.tlog import Checkpoint
from certd.v1 import ledger_pb2, tasks_pb2

from .ratchet_records import Family, Rollout
from .ratchet_state import Reason, Refused, refusal

__all__ = ["Evidence", "Outcome", "ReceiptCache"]

ReceiptCache = dict[bytes, tuple[bytes, int] | Refused]
"""Per receipt envelope hash: its (batch root, batch size), or why it was refused."""


@dataclass
class Outcome:
    """What one decision found: refusals, checkpoints seen, the proof it misses."""

    reasons: list[tuple[Reason, str]] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    seen: list[Checkpoint] = field(default_factory=list)
    missing: tuple[int, int] | None = None

    def refuse(self, e: Refused, where: str = "") -> None:
        """Add the refusal ``e``, its detail prefixed with ``where``."""
        self.reasons.append((e.reason, f"{where}{e.detail}"))


@dataclass(frozen=True)
class Evidence:
    """Checks evidence against the trusted log keys, origin and the configured κs."""

    keys: KeyRing
    origin: str | None
    kappas: frozenset[str]

    def _proven(self, envelope_proof: ledger_pb2.InclusionProof, out: Outcome) -> None:
        """Note the checkpoint an (already verified) inclusion proof is tied to."""
        out.checkpoints.append(
            open_log_checkpoint(envelope_proof.checkpoint.note, self.keys, self.origin)
        )

    def _seen(self, proof: ledger_pb2.InclusionProof, out: Outcome) -> None:
        """Note a checkpoint signed by the log, whatever becomes of the entry it covers."""
        try:
            out.seen.append(open_log_checkpoint(proof.checkpoint.note, self.keys, self.origin))
        except CertdError:
            pass  # refused with its reason where the proof is checked

    def check_family(self, fam: Family, digest: str, out: Outcome) -> FeasibilityClaim:
        """Check a family's certificate for the task of ``digest``; return what it signs.

        Raises:
            Refused: the certificate does not open, or its κ, task, label or witness differ.
        """
        cert = fam.certificate
        self._seen(cert.inclusion, out)
        try:
            claim = verify_certificate(cert, self.keys, origin=self.origin)
        except CertdError as e:
            raise refusal(e) from e
        if claim.kappa not in self.kappas:
            raise Refused(Reason.WRONG_KAPPA, f"κ {claim.kappa!r} is not configured")
        if claim.task_digest != digest:
            raise Refused(Reason.REPLAYED, f"certificate is for task {claim.task_digest[:16]}…")
        if claim.label != fam.label:
            raise Refused(
                Reason.TAMPERED_LABEL,
                f"the record says label {fam.label!r}, the certificate {claim.label!r}",
            )
        if claim.witness_digest != sha256_hex(fam.witness.encode()):
            raise Refused(Reason.TAMPERED_WITNESS, "witness does not match its digest")
        self._proven(cert.inclusion, out)  # only a family that passed speaks for its checkpoint
        return claim

    def _open_receipt(
        self, ro: Rollout, receipts: ReceiptCache, out: Outcome
    ) -> tuple[bytes, bytes, int]:
        """Open the rollout's receipt once per group; return its envelope hash, batch root and
        batch size.

        Raises:
            Refused: the receipt does not open (again for every rollout it covers).
        """
        receipt = ro.receipt
        env_hash = hashlib.sha256(receipt.envelope).digest()
        seen = receipts.get(env_hash)
        if seen is None:  # each receipt of the group is opened once
            self._seen(receipt.inclusion, out)
            try:
                claim = verify_receipt(receipt, self.keys, self.origin)
                self._proven(receipt.inclusion, out)
                seen = (claim.batch_root, claim.batch_size)
            except CertdError as e:
                seen = refusal(e)
            receipts[env_hash] = seen
        if isinstance(seen, Refused):
            raise seen
        root, size = seen
        return env_hash, root, size

    def check_rollout(
        self, ro: Rollout, digest: str, family: str, receipts: ReceiptCache, out: Outcome
    ) -> tuple[bytes, int]:
        """Check one rollout of the group of (task ``digest``, ``family``).

        Raises:
            Refused: its receipt does not open or cover it, its verdict is not this task's
                and response's, carries no reward, or is for another family or κ.

        Returns:
            Its identity: (receipt envelope hash, index in its batch).
        """
        env_hash, root, size = self._open_receipt(ro, receipts, out)
        v = ro.verdict
        path = v.receipt_path
        if path.batch_size != size or receipt_root_from_path(v.digest, path) != root:
            raise Refused(Reason.BAD_PROOF, "the verdict is not covered by its receipt")
        if verdict_digest(v, digest, ro.response) != v.digest:
            if (
                ro.task_sha256 != digest
                and ro.task_sha256
                and (verdict_digest(v, ro.task_sha256, ro.response) == v.digest)
            ):
                raise Refused(Reason.REPLAYED, f"verdict is for task {ro.task_sha256[:16]}…")
            raise Refused(
                Reason.TAMPERED_WITNESS,
                "the response or verdict does not match the digest its receipt covers",
            )
        if v.status == tasks_pb2.INFRA_ERROR:
            raise Refused(Reason.MALFORMED, "an INFRA_ERROR verdict carries no reward")
        label = v.family.value if v.HasField("family") else ""
        if label != family:
            raise Refused(Reason.WRONG_SUBJECT, f"verdict is for family {label!r}")
        if v.HasField("family") and v.family.kappa not in self.kappas:
            raise Refused(Reason.WRONG_KAPPA, f"κ {v.family.kappa!r} is not configured")
        return env_hash, path.index
