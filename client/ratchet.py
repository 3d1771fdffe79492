"""The ratchet: training data gets in only with certificates that verify, offline.

Example::

    ratchet = Ratchet([vkey], kappas={"countdown.first-op.v1"})
    ratchet.load_state(state_path)           # what earlier runs trusted (a new file: none)
    admission = ratchet.admit(record)        # a fork-tree record or a stratified group
    if not admission.admitted:
        print(admission.reasons)             # [("REPLAYED", "certificate is for task …"), …]
    ratchet.save_state(state_path)           # atomically; the next run starts from here

A record is ``{"task": {"domain": "countdown", "numbers": [...], "target": 83},
"families": [{"label": "25,-", "witness": "(25-5)*4+3", "certificate": {…}}, …],
"consistency": [{"first": 50, "second": 51, "hashes": ["…"]}]}`` where each certificate is
the protobuf JSON of ``certd.v1.Certificate`` and ``consistency`` holds the proofs that link
the record's checkpoints (what ``ForkTreeBuilder`` attaches, so files admit offline). A
record is admitted whole or not at all, when for every family:

* the certificate's statement opens (``certd.statements.open_statement``: ``MALFORMED``,
  ``UNKNOWN_KEY`` also for a key outside its validity window, ``BAD_SIGNATURE``,
  ``WRONG_SUBJECT`` for another predicate type);
* its inclusion proof leads to a checkpoint signed by a trusted key (``BAD_PROOF``);
* every unsigned copy agrees with the signed payload: the certificate's ``certificateId``
  (``TAMPERED_CERTIFICATE_ID``), ``ledgerIndex`` (``TAMPERED_INDEX``), ``label``
  (``TAMPERED_LABEL``), ``witness`` (``TAMPERED_WITNESS``), and the record's ``label``,
  ``witness`` and ``task_digest``;
* it is about this record's task (``REPLAYED``) under a configured κ (``WRONG_KAPPA``);

and the record's checkpoints are consistent with the trusted one (``plan`` in
``forkgate.ratchet_state``): one that forks is ``INCONSISTENT_CHECKPOINT``; a newer one
without a proof ``UNPROVEN_CHECKPOINT``; an older, unknown one without a proof
``STALE_CHECKPOINT``. The task's certified coverage never shrinks (``COVERAGE_SHRANK``); a
record with no families certifies nothing and is admitted unless it drops coverage.

The ratchet does no I/O while it decides (python-tuf's ngclient style): a refusal for a
missing proof names it in ``Admission.missing``; a caller that can fetch it passes it back
with ``admit(record, proofs={(a, b): hashes})``, or hands the ratchet a fetching function
(``consistency=``), which ``admit`` calls between decisions.

A **stratified group** (a record with ``rollouts``; see ``Ratchet.admit_group``) is checked
the same way through its verdict receipts. With ``witness_quorum`` > 0 every checkpoint must
be covered by the latest one that ``witness_quorum`` trusted witnesses cosigned
(``UNWITNESSED_CHECKPOINT``; see ``forkgate.witness``). Training checkpoints move forward
through ``CheckpointRatchet`` (``forkgate.checkpoint_ratchet``).

Records and groups are parsed in ``forkgate.ratchet_records``; their certificates, receipts
and verdicts are opened in ``forkgate.ratchet_evidence``; the trusted state and ``plan`` live in
``forkgate.ratchet_state``. This module decides.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certd.errors import CertdError
from certd.signing.dsse import KeyRing
from certd.signing.keys import VerifierKey
from certd.statements import task_digest
from certd.tlog import Checkpoint

from ._base import load_keyring
from .checkpoint_ratchet import CheckpointRatchet, Promotion, log_id
from .errors import (
    CertdUnavailableError,
    DeadlineExceededError,
    ForkgateError,
    VerificationError,
)
from .ratchet_evidence import Evidence, Outcome, ReceiptCache
from .ratchet_records import ProofMap, parse_group, parse_tree, record_copies
from .ratchet_state import (
    MissingProof,
    PlanRefused,
    Proofs,
    RatchetState,
    Reason,
    Refused,
    TrustedCheckpoint,
    check_prefix,
    plan,
    refusal_of_plan,
)
from .witness import load_witness_keys, open_witnessed

__all__ = [
    "Admission",
    "CheckpointRatchet",
    "Promotion",
    "Ratchet",
    "RatchetState",
    "Reason",
    "TrustedCheckpoint",
]

ConsistencySource = Callable[[int, int], Sequence[bytes]]
_MAX_FETCHES = 16


@dataclass(frozen=True, slots=True)
class Admission:
    """The ratchet's decision on one record.

    Attributes:
        admitted: whether the record got in.
        reasons: every (reason, detail) found when refused.
        missing: the consistency proof (first, second) whose absence refused it, if any.
    """

    admitted: bool
    reasons: tuple[tuple[Reason, str], ...] = ()
    missing: tuple[int, int] | None = None


class Ratchet:
    """Admits fork-tree records and stratified groups whose certificates verify.

    Args:
        trusted_keys: the log keys (vkey strings, files, VerifierKeys or a KeyRing).
        kappas: the κ name@versions accepted.
        consistency: the caller's proof fetcher, ``(first, second) -> hashes`` (e.g.
            ``lambda a, b: client.consistency_proof(a, b).hashes``), called between
            decisions when one misses a proof; None admits only what the records and the
            state prove.
        trusted: a checkpoint to start from when the state has none (None: trust the first).
        origin: the log origin the checkpoints must carry, or None for any.
        witness_keys: trusted witnesses' cosigner keys.
        witness_quorum: cosignatures required on a checkpoint (0: no witness needed).
        state: the trusted state to start from (``RatchetState.load``); None: a fresh one.
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
        state: RatchetState | None = None,
    ) -> None:
        keys = load_keyring(trusted_keys)
        assert keys is not None
        self.keys = keys
        self.kappas = frozenset(kappas)
        self.consistency = consistency
        self.origin = origin
        self.state = state if state is not None else RatchetState(log=log_id(keys, origin))
        if self.state.trusted is None and trusted is not None:
            self.state.trusted = trusted
        # (receipt envelope hash, index in its batch) -> the group it was admitted in
        self._rollouts: dict[tuple[bytes, int], bytes] = {}
        self.witness_keys = load_witness_keys(witness_keys)
        self.witness_quorum = witness_quorum
        if witness_quorum > len(self.witness_keys):
            raise VerificationError(
                f"witness quorum {witness_quorum} exceeds the {len(self.witness_keys)} "
                "trusted witness keys"
            )

    @property
    def trusted(self) -> TrustedCheckpoint | None:
        """The log checkpoint this ratchet trusts."""
        return self.state.trusted

    @property
    def coverage(self) -> dict[str, frozenset[str]]:
        """Per task digest, the families admitted so far."""
        return self.state.coverage

    @property
    def witnessed(self) -> TrustedCheckpoint | None:
        """The newest checkpoint a witness quorum cosigned."""
        return self.state.witnessed

    def load_state(self, path: Path) -> None:
        """Start from the state file at ``path`` (nothing changes when it does not exist).

        Raises:
            VerificationError: the file is malformed or the state of another log.
        """
        loaded = RatchetState.load(Path(path), log=self.state.log)
        if loaded is not None:
            loaded.log = self.state.log
            self.state = loaded

    def save_state(self, path: Path) -> None:
        """Write the trusted state to ``path`` atomically and durably.

        Raises:
            VerificationError: the file cannot be written.
        """
        self.state.save(Path(path))

    def _evidence(self) -> Evidence:
        """The evidence checks under this ratchet's keys, origin and κs."""
        return Evidence(self.keys, self.origin, self.kappas)

    def _fetching(
        self,
        decide: Callable[[ProofMap], Admission],
        proofs: Proofs | None,
    ) -> Admission:
        """Decide; while a decision misses a proof a fetcher can get, fetch it, decide again."""
        have = {k: list(v) for k, v in (proofs or {}).items()}
        admission = decide(have)
        for _ in range(_MAX_FETCHES):
            miss = admission.missing
            if miss is None or self.consistency is None or miss in have:
                return admission
            try:
                have[miss] = list(self.consistency(*miss))
            except (CertdUnavailableError, DeadlineExceededError):
                raise  # certd is down: the caller says so (exit 3), not "refused"
            except (ForkgateError, CertdError) as e:  # the source could not prove it
                detail = f"consistency proof {miss[0]} → {miss[1]} unavailable: {e}"
                return Admission(False, ((Reason.UNPROVEN_CHECKPOINT, detail),), miss)
            admission = decide(have)
        return admission

    def witness(self, note: str, proofs: Proofs | None = None) -> TrustedCheckpoint:
        """Accept a checkpoint cosigned by a quorum of witnesses as the witnessed one.

        Args:
            note: the log's checkpoint with witness cosignature lines
                (``forkgate.witness.witnessed_checkpoint``).
            proofs: consistency proofs to the one witnessed before (else the fetcher's).

        Raises:
            VerificationError: too few cosignatures, a bad signature, or the checkpoint is
                not consistent with the one witnessed before.

        Returns:
            The witnessed checkpoint.
        """
        cp = open_witnessed(note, self.keys, self.witness_keys, self.witness_quorum, self.origin)

        def decide(have: ProofMap) -> Admission:
            try:
                new, _ = plan(self.state.witnessed, {}, [cp], have)
            except MissingProof as e:
                return Admission(
                    False, ((Reason.UNPROVEN_CHECKPOINT, str(e)),), (e.first, e.second)
                )
            except PlanRefused as e:
                return Admission(False, ((Reason.INCONSISTENT_CHECKPOINT, str(e)),))
            self.state.witnessed = new
            return Admission(True)

        admission = self._fetching(decide, proofs)
        if not admission.admitted:
            raise VerificationError(f"witnessed checkpoint: {admission.reasons[0][1]}")
        assert self.state.witnessed is not None
        return self.state.witnessed

    def _check_witnessed(self, cp: Checkpoint, proofs: Proofs) -> None:
        if self.witness_quorum <= 0:
            return
        w = self.state.witnessed
        if w is None or cp.size > w.size:
            raise Refused(
                Reason.UNWITNESSED_CHECKPOINT,
                f"checkpoint at size {cp.size} is not covered by a checkpoint cosigned by "
                f"{self.witness_quorum} witnesses"
                + ("" if w is None else f" (witnessed size {w.size})"),
            )
        try:
            check_prefix(cp, w, {}, proofs)
        except PlanRefused as e:
            raise Refused(Reason.INCONSISTENT_CHECKPOINT, f"against the witnessed: {e}") from e

    def admit(self, record: Mapping[str, Any], proofs: Proofs | None = None) -> Admission:
        """Admit a fork-tree record or a stratified group whole, or refuse it with every reason.

        A record with ``rollouts`` is a stratified group (see ``admit_group``); any other is a
        fork-tree record.

        Args:
            record: the record.
            proofs: consistency proofs the caller fetched, besides those the record carries.
        """
        if isinstance(record, Mapping) and "rollouts" in record:
            return self.admit_group(record, proofs)
        return self._fetching(lambda have: self._decide_tree(record, have), proofs)

    def _decide_tree(self, record: Mapping[str, Any], have: Proofs) -> Admission:
        try:
            task, families, attached = parse_tree(record)
        except Refused as e:
            return Admission(False, ((e.reason, e.detail),))
        digest = task_digest(task)
        out, evidence = Outcome(), self._evidence()
        copy = record.get("task_digest")
        if copy is not None and copy != digest:
            out.reasons.append(
                (Reason.TAMPERED_TASK_DIGEST, f"task_digest {str(copy)[:16]}… is not the task's")
            )
        claims = []
        for fam in families:
            try:
                claims.append(evidence.check_family(fam, digest, out))
            except Refused as e:
                out.refuse(e, f"family {fam.label!r}: ")
        out.reasons.extend(record_copies(record, families, claims))
        labels = frozenset(f.label for f in families)
        lost = self.state.coverage.get(digest, frozenset()) - labels
        if lost:
            out.reasons.append(
                (Reason.COVERAGE_SHRANK, f"families admitted before are missing: {sorted(lost)}")
            )
        admission = self._settle(out, {**attached, **have})
        if admission.admitted:
            self.state.coverage[digest] = self.state.coverage.get(digest, frozenset()) | labels
        return admission

    def _settle(self, out: Outcome, proofs: Proofs) -> Admission:
        """Fit the checkpoints seen to the trusted state; learn them when they fit."""
        for cp in out.checkpoints:
            try:
                self._check_witnessed(cp, proofs)
            except MissingProof as e:
                out.missing = (e.first, e.second)
                out.reasons.append((Reason.UNWITNESSED_CHECKPOINT, str(e)))
            except Refused as e:
                out.refuse(e)
        try:
            trusted, known = plan(self.state.trusted, self.state.known, out.checkpoints, proofs)
        except (MissingProof, PlanRefused) as e:
            out.refuse(refusal_of_plan(e))
            if isinstance(e, MissingProof):
                out.missing = (e.first, e.second)
        else:
            self.state.trusted, self.state.known = trusted, known
        try:  # every signed checkpoint the proofs link is the log's state, whatever the record
            self.state.trusted, self.state.known = plan(
                self.state.trusted, self.state.known, out.seen, proofs
            )
        except (MissingProof, PlanRefused):
            pass  # learning is optional; the decision above stands
        if out.reasons:
            return Admission(False, tuple(out.reasons), out.missing)
        return Admission(True)

    def admit_group(self, record: Mapping[str, Any], proofs: Proofs | None = None) -> Admission:
        """Admit a stratified group whole, or refuse it with every reason found.

        A group is ``{"task": {…}, "family": "25,-", "rollouts": [{"response": "…",
        "verdict": {…}, "receipt": {…}}, …]}`` with, optionally, ``"certificate"`` and
        ``"witness"`` (the feasibility certificate of (task, family)) and ``"consistency"``.
        Each verdict and receipt is the protobuf JSON certd returned; a rollout may carry
        ``"task_sha256"``, the digest of the task it was verified against, so that a rollout
        moved from another task is named ``REPLAYED`` rather than ``TAMPERED_WITNESS``. Every
        receipt opens like a certificate (``verify_receipt``: key, signature, inclusion proof,
        copies of root and size); every verdict digest must be the one recomputed from this
        task, its response and its verdict; its κ label must be the group's family under a
        configured κ. A rollout may appear in one group only (the same group again is
        admitted again). Groups leave the fork-tree coverage as it is.
        """
        return self._fetching(lambda have: self._decide_group(record, have), proofs)

    def _decide_group(self, record: Mapping[str, Any], have: Proofs) -> Admission:
        try:
            task, family, rollouts, fam, attached = parse_group(record)
        except Refused as e:
            return Admission(False, ((e.reason, e.detail),))
        digest = task_digest(task)
        out, evidence = Outcome(), self._evidence()
        if fam is not None:
            try:
                evidence.check_family(fam, digest, out)
            except Refused as e:
                out.refuse(e, "certificate: ")
        receipts: ReceiptCache = {}
        keys: list[tuple[bytes, int]] = []
        for n, ro in enumerate(rollouts):
            try:
                keys.append(evidence.check_rollout(ro, digest, family, receipts, out))
            except Refused as e:
                out.refuse(e, f"rollout {n}: ")
        if len(set(keys)) != len(keys):
            out.reasons.append((Reason.REPLAYED, "a rollout appears twice in the group"))
        group_id = hashlib.sha256(
            json.dumps([digest, family, sorted((k.hex(), i) for k, i in keys)]).encode()
        ).digest()
        elsewhere = sum(1 for k in keys if self._rollouts.get(k, group_id) != group_id)
        if elsewhere:
            out.reasons.append(
                (Reason.REPLAYED, f"{elsewhere} rollouts were admitted in another group")
            )
        admission = self._settle(out, {**attached, **have})
        if admission.admitted:
            for k in keys:
                self._rollouts[k] = group_id
        return admission
