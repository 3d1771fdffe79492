"""What certd signs: the task and verdict digests, a receipt's batch tree, the predicates.

Light and pure (the ``certd.v1`` stubs, the in-toto canonical JSON and the Merkle hashes), so
the server that builds statements and the ``forkgate`` client that checks them
(``certd.statements``) compute the same bytes from the same values.

Example:
    >>> from certd.v1 import tasks_pb2
    >>> task = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83))
    >>> task_json(task)
    {'domain': 'countdown', 'numbers': [25, 5, 4, 3], 'rules': {'exactly_once': True}, 'target': 83}
    >>> len(task_digest(task))
    64

A math task's identity is its question with its gold and precision (``TASK_IDENTITY`` 2):
    >>> q = tasks_pb2.Task(math=tasks_pb2.MathTask(gold="5", question="Solve  2x - 3 = 7. "))
    >>> task_json(q)
    {'domain': 'math', 'gold': '5', 'question': 'Solve 2x - 3 = 7.', 'task_identity': 2}
    >>> task_json(q, identity=1)  # the object certd signed before questions were covered
    {'domain': 'math', 'gold': '5'}
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from certd import tlog
from certd.errors import InvalidInputError
from certd.signing.intoto import canonical_json
from certd.taskspec import task_spec
from certd.taskspec.math import normalise_question
from certd.v1 import tasks_pb2, verifier_pb2

__all__ = [
    "TASK_IDENTITY",
    "batch_tree",
    "feasibility_predicate",
    "label_json",
    "normalise_question",
    "receipt_predicate",
    "sha256_hex",
    "task_digest",
    "task_digests",
    "task_json",
    "verdict_digest",
    "verdict_digest_of",
]


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


TASK_IDENTITY = 2
"""The version of what a task's digest covers. 1: a math task is its gold (and precision);
2: a math task with a question is its question (``normalise_question``), gold and precision,
and its object says ``"task_identity": 2``. Countdown and code tasks are the same in both; a
math task without a question keeps its version-1 object (docs/formats.md §Task identity)."""


def task_json(task: tasks_pb2.Task, *, identity: int = TASK_IDENTITY) -> dict[str, Any]:
    """The canonical JSON object of a task (its digest is over ``canonical_json`` of this).

    Args:
        task: the task.
        identity: the ``TASK_IDENTITY`` version to write (1: the object before questions were
            covered, to check entries signed then).

    Raises:
        InvalidInputError: the task names no domain.
    """
    domain = task.WhichOneof("domain")
    spec = task_spec(domain) if domain else None
    if spec is not None:
        return spec.canonical(getattr(task, domain), identity)
    raise InvalidInputError("task names no domain", field="task")


def task_digest(task: tasks_pb2.Task) -> str:
    """Hex SHA-256 of the task's canonical JSON (sorted keys, no spaces, UTF-8)."""
    return sha256_hex(canonical_json(task_json(task)))


def task_digests(task: tasks_pb2.Task) -> tuple[str, ...]:
    """Every digest an entry about this task may carry: the current one, then the
    version-1 digest when it differs (a math task with a question, signed before questions
    were covered). Checking an old entry uses both; certd signs only the first."""
    now = task_digest(task)
    old = sha256_hex(canonical_json(task_json(task, identity=1)))
    return (now,) if old == now else (now, old)


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
    n); ``tlog.root_from_inclusion_proof`` verifies the paths.

    Args:
        digests: the verdict digests, in batch order (at least one).

    Raises:
        ValueError: ``digests`` is empty.

    Returns:
        (root, paths) where ``paths[i]`` is the inclusion path of digest ``i``.
    """
    if not digests:
        raise ValueError("a receipt covers at least one verdict")
    levels: list[list[bytes]] = [[tlog.leaf_hash(d) for d in digests]]
    while len(levels[-1]) > 1:
        below = levels[-1]
        above = [tlog.node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
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
    task_sha256: str | None = None,
    feasible: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The predicate of a feasibility certificate (see docs/formats.md).

    ``task_sha256`` is ``task_digest(task)`` when the caller has it already (it is not
    computed twice). ``feasible`` is what certd's enumeration of the task found, for a
    domain that enumerates (Countdown): ``{"labels": N, "families": M, "complete": bool}``;
    it is the signed denominator of coverage (omitted otherwise).
    """
    obj = task_json(task)
    extra = {} if feasible is None else {"feasible": dict(sorted(feasible.items()))}
    return {
        **extra,
        "canonical_digest": sha256_hex(canonical.encode()),
        "domain": obj["domain"],
        "issued_at": issued_at,
        "kappa": kappa,
        "label": label,
        "label_fields": dict(sorted(label_fields.items())),
        "task": obj,
        "task_digest": task_sha256 or sha256_hex(canonical_json(obj)),
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
