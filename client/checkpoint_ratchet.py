"""The checkpoint ratchet: a training checkpoint moves forward only with a valid certificate.

Example::

    ratchet = CheckpointRatchet([vkey], run="run-1")
    promotion = ratchet.promote(weights_sha256, certificate, proofs=proofs)
    if promotion.missing:                       # a consistency proof the caller must fetch
        a, b = promotion.missing
        proofs[(a, b)] = client.consistency_proof(a, b).hashes
        promotion = ratchet.promote(weights_sha256, certificate, proofs=proofs)

``promote(digest, certificate)`` promotes a training checkpoint only with an acceptance
certificate (docs/support-guard.md) that opens through ``certd.statements`` (key, window,
signature, predicate type, shape; copies of id and index compared), is about that checkpoint
(``WRONG_CHECKPOINT``) and run (``WRONG_RUN``), is included under a log checkpoint consistent
with the trusted one, and extends the chain this ratchet promoted before (``BROKEN_CHAIN``).
It decides without I/O; ``forkgate.acceptance.promote_checkpoint`` fetches the proofs it
misses through the client it is given. The state (trusted log checkpoint, known roots, the
head of each run's chain) is a ``RatchetState`` and persists with ``save_state``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from certd.errors import CertdError
from certd.signing.dsse import KeyRing
from certd.signing.keys import VerifierKey
from certd.statements import AcceptanceClaim, open_log_checkpoint, verify_acceptance
from certd.v1 import authority_pb2

from ._base import load_keyring
from .errors import CertdUnavailableError, DeadlineExceededError, ForkgateError
from .ratchet_state import (
    MissingProof,
    PlanRefused,
    Proofs,
    RatchetState,
    Reason,
    TrustedCheckpoint,
    plan,
    refusal,
    refusal_of_plan,
)

__all__ = ["CheckpointRatchet", "Promotion", "log_id"]


def log_id(keys: KeyRing, origin: str | None) -> str:
    """The name a state file carries: the trusted key ids and the origin."""
    return ",".join(sorted({t.key.key_id_hex for t in keys})) + "@" + (origin or "*")


@dataclass(frozen=True, slots=True)
class Promotion:
    """The checkpoint ratchet's decision on one checkpoint.

    Attributes:
        promoted: whether the checkpoint moved forward.
        reasons: every (reason, detail) found when refused.
        claim: the verified acceptance claim, when the certificate opened.
        missing: the consistency proof (first, second) whose absence refused it, if any.
    """

    promoted: bool
    reasons: tuple[tuple[Reason, str], ...] = ()
    claim: AcceptanceClaim | None = None
    missing: tuple[int, int] | None = None


class CheckpointRatchet:
    """Promotes training checkpoints only with valid, chained acceptance certificates.

    Args:
        trusted_keys: the log keys (vkey strings, files, VerifierKeys or a KeyRing).
        run: the training run whose chain this follows.
        head: the certificate id of the last promoted certificate ("" for none yet: the first
            certificate must then be the run's first, with no predecessor); ignored when the
            state already has a head for the run.
        consistency: the caller's proof fetcher ``(first, second) -> hashes``, called between
            decisions (None: only proofs handed to ``promote``).
        trusted: a log checkpoint to start from when the state has none.
        origin: the log origin the checkpoints must carry, or None for any.
        state: the trusted state to start from; None: a fresh one.
    """

    def __init__(
        self,
        trusted_keys: KeyRing | Iterable[str | Path | VerifierKey],
        *,
        run: str,
        head: str = "",
        consistency: Callable[[int, int], Sequence[bytes]] | None = None,
        trusted: TrustedCheckpoint | None = None,
        origin: str | None = None,
        state: RatchetState | None = None,
    ) -> None:
        keys = load_keyring(trusted_keys)
        assert keys is not None
        self.keys = keys
        self.run = run
        self.origin = origin
        self.consistency = consistency
        self.state = state if state is not None else RatchetState(log=log_id(keys, origin))
        if self.state.trusted is None and trusted is not None:
            self.state.trusted = trusted
        if head and run not in self.state.heads:
            self.state.heads[run] = head
        self.promoted: list[AcceptanceClaim] = []

    @property
    def trusted(self) -> TrustedCheckpoint | None:
        """The log checkpoint this ratchet trusts."""
        return self.state.trusted

    @property
    def head(self) -> str:
        """The certificate id of the run's last promoted certificate ("" for none)."""
        return self.state.heads.get(self.run, "")

    def save_state(self, path: Path) -> None:
        """Write the trusted state atomically (see ``RatchetState.save``)."""
        self.state.save(Path(path))

    def promote(
        self,
        checkpoint_digest: str,
        certificate: authority_pb2.AcceptanceCertificate | None,
        *,
        proofs: Proofs | None = None,
        fetch: Callable[[int, int], Sequence[bytes]] | None = None,
    ) -> Promotion:
        """Promote the checkpoint with this digest, or refuse with every reason found.

        Args:
            checkpoint_digest: the training checkpoint's digest.
            certificate: its acceptance certificate.
            proofs: consistency proofs the caller fetched.
            fetch: a proof fetcher for this call (default: ``consistency``).
        """
        have = {k: list(v) for k, v in (proofs or {}).items()}
        fetch = fetch or self.consistency
        promotion = self._decide(checkpoint_digest, certificate, have)
        while promotion.missing is not None and fetch is not None:
            if promotion.missing in have:
                break
            try:
                have[promotion.missing] = list(fetch(*promotion.missing))
            except (CertdUnavailableError, DeadlineExceededError):
                raise  # certd is down: not a refusal
            except (ForkgateError, CertdError) as e:
                detail = f"consistency proof unavailable: {e}"
                return Promotion(False, ((Reason.UNPROVEN_CHECKPOINT, detail),), None)
            promotion = self._decide(checkpoint_digest, certificate, have)
        return promotion

    def _decide(
        self,
        checkpoint_digest: str,
        certificate: authority_pb2.AcceptanceCertificate | None,
        proofs: Proofs,
    ) -> Promotion:
        if certificate is None or not certificate.envelope:
            return Promotion(False, ((Reason.NO_CERTIFICATE, "no acceptance certificate"),))
        try:
            claim = verify_acceptance(certificate, self.keys, origin=self.origin)
            cp = open_log_checkpoint(certificate.inclusion.checkpoint.note, self.keys, self.origin)
        except CertdError as e:
            r = refusal(e)
            return Promotion(False, ((r.reason, r.detail),))
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
        missing = None
        try:
            trusted, known = plan(self.state.trusted, self.state.known, [cp], proofs)
        except (MissingProof, PlanRefused) as e:
            r = refusal_of_plan(e)
            reasons.append((r.reason, r.detail))
            missing = (e.first, e.second) if isinstance(e, MissingProof) else None
        else:
            self.state.trusted, self.state.known = trusted, known
        if reasons:
            return Promotion(False, tuple(reasons), claim, missing)
        self.state.heads[self.run] = claim.certificate_id
        self.promoted.append(claim)
        return Promotion(True, (), claim)
