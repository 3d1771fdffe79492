"""How anyone checks what certd signs, offline (and, re-exported, what it signs).

Light and pure: it needs only the ``certd.v1`` stubs, ``certd.signing`` and the Merkle and
checkpoint primitives, so the ``forkgate`` client imports it without the server. The digests
and predicates themselves are built in ``certd.payloads`` (re-exported here: this is the
client's one import); statements are opened by ``certd.opening``.

Example:
    >>> from certd.v1 import tasks_pb2
    >>> task = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83))
    >>> task_json(task)
    {'domain': 'countdown', 'numbers': [25, 5, 4, 3], 'rules': {'exactly_once': True}, 'target': 83}
    >>> len(task_digest(task))
    64
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from certd import tlog
from certd.errors import (
    InvalidInputError,
    MalformedStatementError,
    ProofError,
    TamperedError,
)
from certd.opening import (
    PREDICATE_ACCEPTANCE,
    PREDICATE_ACCEPTANCE_REFUSAL,
    PREDICATE_FEASIBILITY,
    PREDICATE_TYPES,
    PREDICATE_VERDICT_RECEIPT,
    open_log_checkpoint,
    open_statement,
)
from certd.payloads import (
    batch_tree,
    feasibility_predicate,
    label_json,
    receipt_predicate,
    sha256_hex,
    task_digest,
    task_digests,
    task_json,
    verdict_digest,
    verdict_digest_of,
)
from certd.signing.dsse import KeyRing
from certd.v1 import authority_pb2, ledger_pb2, tasks_pb2, verifier_pb2

__all__ = [
    "AcceptanceClaim",
    "FeasibilityClaim",
    "PREDICATE_ACCEPTANCE",
    "PREDICATE_ACCEPTANCE_REFUSAL",
    "PREDICATE_FEASIBILITY",
    "PREDICATE_TYPES",
    "PREDICATE_VERDICT_RECEIPT",
    "ReceiptClaim",
    "batch_tree",
    "feasibility_predicate",
    "label_json",
    "open_log_checkpoint",
    "open_statement",
    "receipt_predicate",
    "receipt_root_from_path",
    "sha256_hex",
    "task_digest",
    "task_digests",
    "task_json",
    "verdict_digest",
    "verdict_digest_of",
    "verify_acceptance",
    "verify_certificate",
    "verify_inclusion",
    "verify_receipt",
    "verify_verdict",
]


@dataclass(frozen=True, slots=True)
class FeasibilityClaim:
    """The verified content of a feasibility certificate."""

    task_digest: str
    domain: str
    kappa: str
    label: str
    witness_digest: str
    verifier: str
    issued_at: int
    ledger_index: int
    tree_size: int
    witness: str = ""
    label_fields: Mapping[str, str] = field(default_factory=dict)
    feasible_labels: int | None = None
    """How many feasible labels certd's enumeration of the task found (signed), or None
    for a domain that does not enumerate (coverage then counts certified families)."""
    feasible_families: int | None = None


@dataclass(frozen=True, slots=True)
class ReceiptClaim:
    """The verified content of a verdict receipt."""

    batch_root: bytes
    batch_size: int
    issued_at: int
    ledger_index: int


def verify_inclusion(
    entry: bytes, proof: ledger_pb2.InclusionProof, keys: KeyRing, origin: str | None = None
) -> int:
    """Check that ``entry`` is in the log under a checkpoint signed by a trusted key.

    The checkpoint's unsigned copies (``origin``, ``size``, ``root_hash``, kept for
    readability) must be there and equal the signed note's.

    Raises:
        TamperedError: a checkpoint copy is missing or differs from the signed note.
        ProofError: the proof or the checkpoint does not match.
        SigningError: the checkpoint is not signed by a trusted key.

    Returns:
        The tree size the proof is tied to.
    """
    leaf = tlog.leaf_hash(entry)
    if proof.leaf_hash and proof.leaf_hash != leaf:
        raise ProofError(f"leaf hash: expected {leaf.hex()}, got {proof.leaf_hash.hex()}")
    cp = open_log_checkpoint(proof.checkpoint.note, keys, origin)
    _same("inclusion.checkpoint.origin", cp.origin, proof.checkpoint.origin)
    _same("inclusion.checkpoint.size", cp.size, proof.checkpoint.size)
    _same("inclusion.checkpoint.rootHash", cp.root_hash.hex(), proof.checkpoint.root_hash.hex())
    if cp.size != proof.tree_size:
        raise ProofError(f"checkpoint size: expected {proof.tree_size}, got {cp.size}")
    tlog.verify_inclusion(leaf, proof.leaf_index, proof.tree_size, list(proof.hashes), cp.root_hash)
    return cp.size


def _same(field: str, signed: object, copy: object) -> None:
    if signed != copy:
        raise TamperedError(
            f"{field}: the signed payload says {signed!r:.80}, the record's copy {copy!r:.80}",
            field=field,
        )


def verify_certificate(
    cert: authority_pb2.Certificate,
    keys: KeyRing,
    *,
    task: tasks_pb2.Task | None = None,
    origin: str | None = None,
) -> FeasibilityClaim:
    """Verify a feasibility certificate offline: statement, ledger proof and every copy.

    Every unsigned copy the message carries is compared with the signed payload or proof:
    ``certificate_id`` (SHA-256 of the envelope), ``ledger_index`` (the proof's leaf index),
    ``label`` (value, κ and fields), ``witness`` and the inclusion checkpoint's ``origin``,
    ``size`` and ``root_hash``. A deleted ``label``, ``witness`` or checkpoint copy is a
    tamper too (certd always writes them); an empty ``certificate_id`` is ignored.

    Args:
        cert: the certificate as certd returned it.
        keys: trusted log keys (with the index windows of the log's key rotations:
            ``certd.keyrotation.follow``).
        task: when given, the certificate must be about this task.
        origin: when given, the checkpoint must carry this log origin.

    Raises:
        SigningError: the statement does not open (see ``open_statement``).
        ProofError: the inclusion proof does not tie the envelope to a trusted checkpoint
            (``RootMismatchError`` when it leads to another root).
        TamperedError: a copy disagrees with the signed payload.
        InvalidInputError: the certificate is about another task.

    Returns:
        The verified claim.
    """
    p = open_statement(
        cert.envelope, keys, PREDICATE_FEASIBILITY, at_index=cert.inclusion.leaf_index
    ).predicate
    size = verify_inclusion(cert.envelope, cert.inclusion, keys, origin)
    claim = FeasibilityClaim(
        task_digest=p["task_digest"],
        domain=p["domain"],
        kappa=p["kappa"],
        label=p["label"],
        witness_digest=p["witness_digest"],
        verifier=p["verifier"],
        issued_at=p["issued_at"],
        ledger_index=cert.inclusion.leaf_index,
        tree_size=size,
        witness=p["witness"],
        label_fields={str(k): str(v) for k, v in p["label_fields"].items()},
        feasible_labels=p["feasible"]["labels"] if "feasible" in p else None,
        feasible_families=p["feasible"]["families"] if "feasible" in p else None,
    )
    if cert.certificate_id:
        _same("certificate_id", sha256_hex(cert.envelope), cert.certificate_id)
    _same("ledger_index", claim.ledger_index, cert.ledger_index)
    if not cert.HasField("label"):
        raise TamperedError("label: the copy of the signed label is missing", field="label")
    _same("label.value", claim.label, cert.label.value)
    _same("label.kappa", claim.kappa, cert.label.kappa)
    _same("label.fields", claim.label_fields, dict(cert.label.fields))
    _same("witness", claim.witness, cert.witness)
    if task is not None and claim.task_digest not in task_digests(task):
        raise InvalidInputError(
            f"task digest: expected {task_digest(task)}, got {claim.task_digest}", field="task"
        )
    return claim


@dataclass(frozen=True, slots=True)
class AcceptanceClaim:
    """The verified content of an acceptance certificate.

    ``capabilities`` maps each task set to its predicate object (``figures``, ``change``,
    ``outcomes``, ``tolerances``, ``task_set_digest``); see docs/support-guard.md.
    """

    certificate_id: str
    run: str
    sequence: int
    checkpoint: str
    checkpoint_digest: str
    predecessor: str
    target: str
    seed: int
    issued_at: int
    capabilities: dict[str, dict[str, Any]]
    ledger_index: int
    tree_size: int


def verify_acceptance(
    cert: authority_pb2.AcceptanceCertificate,
    keys: KeyRing,
    *,
    checkpoint_digest: str | None = None,
    origin: str | None = None,
) -> AcceptanceClaim:
    """Verify an acceptance certificate offline: statement, ledger proof and every copy.

    Args:
        cert: the certificate as certd returned it.
        keys: trusted log keys.
        checkpoint_digest: when given, the certificate must be about this checkpoint.
        origin: when given, the checkpoint must carry this log origin.

    Raises:
        SigningError: the statement does not open (see ``open_statement``).
        ProofError: the inclusion proof does not tie the envelope to a trusted checkpoint.
        TamperedError: ``certificate_id`` or ``ledger_index`` disagrees with the envelope/proof.
        InvalidInputError: the certificate is about another checkpoint.

    Returns:
        The verified claim.
    """
    p = open_statement(
        cert.envelope, keys, PREDICATE_ACCEPTANCE, at_index=cert.inclusion.leaf_index
    ).predicate
    size = verify_inclusion(cert.envelope, cert.inclusion, keys, origin)
    checkpoint = p["checkpoint"]
    claim = AcceptanceClaim(
        certificate_id=sha256_hex(cert.envelope),
        run=p["run"],
        sequence=p["sequence"],
        checkpoint=str(checkpoint.get("name", "")),
        checkpoint_digest=str(checkpoint.get("digest", "")),
        predecessor=p["predecessor"],
        target=p["target"],
        seed=p["seed"],
        issued_at=p["issued_at"],
        capabilities={str(k): dict(v) for k, v in p["capabilities"].items()},
        ledger_index=cert.inclusion.leaf_index,
        tree_size=size,
    )
    if cert.certificate_id:
        _same("certificate_id", claim.certificate_id, cert.certificate_id)
    _same("ledger_index", claim.ledger_index, cert.ledger_index)
    if checkpoint_digest is not None and checkpoint_digest != claim.checkpoint_digest:
        raise InvalidInputError(
            f"checkpoint digest: expected {checkpoint_digest}, got {claim.checkpoint_digest}",
            field="checkpoint_digest",
        )
    return claim


def receipt_root_from_path(digest: bytes, path: verifier_pb2.ReceiptPath) -> bytes:
    """The batch root implied by one verdict digest and its receipt path."""
    return tlog.root_from_inclusion_proof(
        tlog.leaf_hash(digest), path.index, path.batch_size, list(path.hashes)
    )


def verify_receipt(
    receipt: verifier_pb2.Receipt, keys: KeyRing, origin: str | None = None
) -> ReceiptClaim:
    """Verify a receipt's signature, statement and ledger inclusion.

    Raises:
        SigningError: the statement does not open (see ``open_statement``).
        ProofError: the receipt is not tied to a trusted checkpoint.
        TamperedError: the message's ``batch_root`` or ``batch_size`` differs from the signed.

    Returns:
        The verified claim.
    """
    p = open_statement(
        receipt.envelope, keys, PREDICATE_VERDICT_RECEIPT, at_index=receipt.inclusion.leaf_index
    ).predicate
    try:
        root = bytes.fromhex(p["batch_root"])
    except ValueError as e:
        raise MalformedStatementError(f"predicate.batch_root: expected hex, got {e}") from e
    verify_inclusion(receipt.envelope, receipt.inclusion, keys, origin)
    claim = ReceiptClaim(
        batch_root=root,
        batch_size=p["batch_size"],
        issued_at=p["issued_at"],
        ledger_index=receipt.inclusion.leaf_index,
    )
    _same("batch_root", claim.batch_root.hex(), receipt.batch_root.hex())
    _same("batch_size", claim.batch_size, receipt.batch_size)
    return claim


def verify_verdict(
    verdict: verifier_pb2.Verdict,
    task: tasks_pb2.Task,
    response: str,
    claim: ReceiptClaim,
    *,
    task_sha256: str | None = None,
) -> None:
    """Check that a verdict for (task, response) is covered by a verified receipt.

    ``task_sha256``, when given, is ``task_digest(task)`` computed by the caller (a batch
    checks many verdicts of one task).

    Raises:
        ProofError: the verdict's digest or path does not lead to the receipt's root.
    """
    digest = verdict_digest(verdict, task_sha256 or task_digest(task), response)
    if digest != verdict.digest and task_sha256 is None:  # a receipt signed under identity 1
        for older in task_digests(task)[1:]:
            if verdict_digest(verdict, older, response) == verdict.digest:
                digest = verdict.digest
    if digest != verdict.digest:
        raise ProofError(
            f"verdict {verdict.id!r} digest: expected {digest.hex()}, got {verdict.digest.hex()}"
        )
    if verdict.receipt_path.batch_size != claim.batch_size:
        raise ProofError(
            f"verdict {verdict.id!r} batch size: expected {claim.batch_size}, "
            f"got {verdict.receipt_path.batch_size}"
        )
    root = receipt_root_from_path(digest, verdict.receipt_path)
    if root != claim.batch_root:
        raise ProofError(
            f"verdict {verdict.id!r} path leads to {root.hex()}, "
            f"expected receipt root {claim.batch_root.hex()}"
        )
