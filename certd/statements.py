"""What certd signs, and how anyone checks it offline.

Light and pure: it needs only the ``certd.v1`` stubs, ``certd.signing`` and the Merkle and
checkpoint primitives, so the ``forkgate`` client imports it without the server.

Example:
    >>> from certd.v1 import tasks_pb2
    >>> task = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83))
    >>> task_json(task)
    {'domain': 'countdown', 'numbers': [25, 5, 4, 3], 'rules': {'exactly_once': True}, 'target': 83}
    >>> len(task_digest(task))
    64
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from certd.errors import (
    InvalidInputError,
    MalformedStatementError,
    ProofError,
    TamperedError,
)
from certd.ledger import merkle
from certd.opening import (
    PREDICATE_ACCEPTANCE,
    PREDICATE_ACCEPTANCE_REFUSAL,
    PREDICATE_FEASIBILITY,
    PREDICATE_TYPES,
    PREDICATE_VERDICT_RECEIPT,
    open_log_checkpoint,
    open_statement,
)
from certd.signing.dsse import KeyRing
from certd.signing.intoto import canonical_json
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
    "label_json",
    "open_log_checkpoint",
    "open_statement",
    "receipt_root_from_path",
    "sha256_hex",
    "task_digest",
    "task_json",
    "verdict_digest",
    "verdict_digest_of",
    "verify_acceptance",
    "verify_certificate",
    "verify_inclusion",
    "verify_receipt",
    "verify_verdict",
]


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def task_json(task: tasks_pb2.Task) -> dict[str, Any]:
    """The canonical JSON object of a task (its digest is over ``canonical_json`` of this).

    Raises:
        InvalidInputError: the task names no domain.
    """
    domain = task.WhichOneof("domain")
    if domain == "countdown":
        cd = task.countdown
        return {
            "domain": "countdown",
            "numbers": list(cd.numbers),
            "rules": {"exactly_once": not cd.rules.at_most_once},
            "target": cd.target,
        }
    if domain == "math":
        # A declared precision changes what counts as equal, so it is part of the task (and of
        # every digest bound to it); an exact task keeps the object it always had.
        out: dict[str, Any] = {"domain": "math", "gold": task.math.gold}
        if task.math.precision_digits:
            out["precision_digits"] = task.math.precision_digits
        return out
    if domain == "code":
        c = task.code
        return {
            "cases": [{"stdin": t.stdin, "stdout": t.stdout} for t in c.cases],
            "compare": c.compare or "exact",
            "domain": "code",
            "entry_point": c.entry_point,
            "language": c.language,
            "prompt": c.prompt,
            "test": c.test,
        }
    raise InvalidInputError("task names no domain", field="task")


def task_digest(task: tasks_pb2.Task) -> str:
    """Hex SHA-256 of the task's canonical JSON (sorted keys, no spaces, UTF-8)."""
    return sha256_hex(canonical_json(task_json(task)))


def label_json(label: tasks_pb2.Label) -> dict[str, Any]:
    """The canonical JSON object of a κ label."""
    return {
        "fields": dict(sorted(label.fields.items())),
        "kappa": label.kappa,
        "value": label.value,
    }


def verdict_digest(verdict: verifier_pb2.Verdict, task_sha256: str, response: str) -> bytes:
    """SHA-256 over the verdict's canonical JSON, bound to the task and the response.

    The receipt's Merkle leaves are these digests; ``elapsed_ms`` and the receipt path are not
    covered (timing is advisory).
    """
    return verdict_digest_of(
        item_id=verdict.id,
        status=tasks_pb2.VerdictStatus.Name(verdict.status),
        reward=verdict.reward,
        family=label_json(verdict.family) if verdict.HasField("family") else None,
        initiated=label_json(verdict.initiated) if verdict.HasField("initiated") else None,
        labels=[label_json(label) for label in verdict.labels],
        detail=verdict.detail,
        verifier=verdict.verifier,
        answer=verdict.answer,
        task_sha256=task_sha256,
        response=response,
    )


def verdict_digest_of(
    *,
    item_id: str,
    status: str,
    reward: float,
    family: Mapping[str, Any] | None,
    initiated: Mapping[str, Any] | None,
    detail: str,
    verifier: str,
    answer: str,
    task_sha256: str,
    response: str,
    labels: Sequence[Mapping[str, Any]] = (),
) -> bytes:
    """``verdict_digest`` from plain values (``family``/``initiated``/``labels`` as ``label_json``).

    The bytes equal ``canonical_json`` of the verdict object (a test holds them equal); they
    are written directly because this runs once per verdict at RL volume. The ``labels`` key
    (the labels under the domain's other κs, in order) is present only when there are some,
    so single-κ verdicts (Countdown) keep their digests.
    """
    if not math.isfinite(reward):
        raise InvalidInputError(f"reward: expected a finite number, got {reward!r}")
    q = _json_string
    text = (
        f'{{"answer":{q(answer)},"detail":{q(detail)},"family":{_label_text(family)},'
        f'"id":{q(item_id)},"initiated":{_label_text(initiated)},{_labels_text(labels)}'
        f'"response_sha256":"{sha256_hex(response.encode("utf-8", "surrogatepass"))}",'
        f'"reward":{float(reward)!r},"status":{q(status)},"task_sha256":{q(task_sha256)},'
        f'"verifier":{q(verifier)}}}'
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


# The C string escaper of the json module, keeping non-ASCII as is (ensure_ascii=False).
_json_string: Callable[[str], str] = json.encoder.encode_basestring


def _labels_text(labels: Sequence[Mapping[str, Any]]) -> str:
    if not labels:
        return ""
    return '"labels":[' + ",".join(_label_text(label) for label in labels) + "],"


def _label_text(label: Mapping[str, Any] | None) -> str:
    if label is None:
        return "null"
    q = _json_string
    fields = ",".join(f"{q(k)}:{q(v)}" for k, v in sorted(label["fields"].items()))
    return f'{{"fields":{{{fields}}},"kappa":{q(label["kappa"])},"value":{q(label["value"])}}}'


def batch_tree(digests: Sequence[bytes]) -> tuple[bytes, list[list[bytes]]]:
    """The RFC 6962 root over ``leaf_hash(digest)`` of each verdict, and every leaf's path.

    Built bottom-up: pairs are hashed left to right and an odd last node is carried up
    unchanged, which yields exactly RFC 6962's tree (split at the largest power of two below
    n); ``merkle.root_from_inclusion_proof`` verifies the paths.

    Args:
        digests: the verdict digests, in batch order (at least one).

    Raises:
        ValueError: ``digests`` is empty.

    Returns:
        (root, paths) where ``paths[i]`` is the inclusion path of digest ``i``.
    """
    if not digests:
        raise ValueError("a receipt covers at least one verdict")
    levels: list[list[bytes]] = [[merkle.leaf_hash(d) for d in digests]]
    while len(levels[-1]) > 1:
        below = levels[-1]
        above = [merkle.node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
        if len(below) % 2:
            above.append(below[-1])
        levels.append(above)
    paths: list[list[bytes]] = []
    for leaf in range(len(digests)):
        path, i = [], leaf
        for level in levels[:-1]:
            sibling = i ^ 1
            if sibling < len(level):
                path.append(level[sibling])
            i >>= 1
        paths.append(path)
    return levels[-1][0], paths


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

    Raises:
        ProofError: the proof or the checkpoint does not match.
        SigningError: the checkpoint is not signed by a trusted key.

    Returns:
        The tree size the proof is tied to.
    """
    leaf = merkle.leaf_hash(entry)
    if proof.leaf_hash and proof.leaf_hash != leaf:
        raise ProofError(f"leaf hash: expected {leaf.hex()}, got {proof.leaf_hash.hex()}")
    cp = open_log_checkpoint(proof.checkpoint.note, keys, origin)
    if cp.size != proof.tree_size:
        raise ProofError(f"checkpoint size: expected {proof.tree_size}, got {cp.size}")
    merkle.verify_inclusion(
        leaf, proof.leaf_index, proof.tree_size, list(proof.hashes), cp.root_hash
    )
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
    ``label`` (value, κ and fields) and ``witness``. An empty copy is ignored (nobody can
    trust what is not there).

    Args:
        cert: the certificate as certd returned it.
        keys: trusted log keys.
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
    p = open_statement(cert.envelope, keys, PREDICATE_FEASIBILITY).predicate
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
    )
    if cert.certificate_id:
        _same("certificate_id", sha256_hex(cert.envelope), cert.certificate_id)
    _same("ledger_index", claim.ledger_index, cert.ledger_index)
    if cert.HasField("label"):
        _same("label.value", claim.label, cert.label.value)
        _same("label.kappa", claim.kappa, cert.label.kappa)
        _same("label.fields", claim.label_fields, dict(cert.label.fields))
    if cert.witness:
        _same("witness", claim.witness, cert.witness)
    if task is not None and task_digest(task) != claim.task_digest:
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
    p = open_statement(cert.envelope, keys, PREDICATE_ACCEPTANCE).predicate
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
    return merkle.root_from_inclusion_proof(
        merkle.leaf_hash(digest), path.index, path.batch_size, list(path.hashes)
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
    p = open_statement(receipt.envelope, keys, PREDICATE_VERDICT_RECEIPT).predicate
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


def feasibility_predicate(
    *,
    task: tasks_pb2.Task,
    kappa: str,
    label: str,
    label_fields: Mapping[str, str],
    witness: str,
    canonical: str,
    verifier: str,
    issued_at: int,
) -> dict[str, Any]:
    """The predicate of a feasibility certificate (see docs/formats.md)."""
    return {
        "canonical_digest": sha256_hex(canonical.encode()),
        "domain": task_json(task)["domain"],
        "issued_at": issued_at,
        "kappa": kappa,
        "label": label,
        "label_fields": dict(sorted(label_fields.items())),
        "task": task_json(task),
        "task_digest": task_digest(task),
        "verifier": verifier,
        "witness": witness,
        "witness_digest": sha256_hex(witness.encode()),
    }


def receipt_predicate(
    *, batch_root: bytes, batch_size: int, verifiers: Sequence[str], issued_at: int
) -> dict[str, Any]:
    """The predicate of a verdict receipt (see docs/formats.md)."""
    return {
        "batch_root": batch_root.hex(),
        "batch_size": batch_size,
        "issued_at": issued_at,
        "leaf": "sha256(canonical verdict JSON); RFC 6962 leaf/node hashing",
        "verifiers": sorted(set(verifiers)),
    }
