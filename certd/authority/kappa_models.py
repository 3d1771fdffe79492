"""Operator-fitted learned-κ models as signed ledger statements (issue 30).

A question's clusters are fitted by the operator, on rollouts the operator trusts
(``certd kappa-fit --rollouts FILE``), never by a Certify: the first certifier of a question
used to bring the rollouts its clusters were fitted on, and ten decoy first steps made ten
"families". The fitted model is recorded once per (task, κ) as an in-toto statement of type
``https://forkgate.dev/attestations/kappa-model/v1`` under the ledger key
``kappa-model/<task digest>/<κ>``; Certify only applies it (``LearnedLabeller.label``).

The predicate (docs/kappa-math.md, docs/formats.md)::

    {"task": {…task JSON…}, "task_digest": "<hex>", "kappa": "math.learned.v1+minilm.…",
     "embedding_model_sha256": "<hex of the weights file>", "method": "upgma-cos0.4",
     "clusters": "<ClusterModel.to_json(): names, sizes, medoids, centroids>",
     "clusters_digest": "<sha256 of clusters>", "steps": "<JSON array of the fitted steps>",
     "issued_at": 1796212345}
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from certd.errors import InvalidInputError
from certd.ledger.modelkeys import model_key, parse_model_entry
from certd.opening import PREDICATE_KAPPA_MODEL
from certd.payloads import task_json
from certd.signing.dsse import sign_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, make_statement
from certd.signing.keys import SigningKey
from certd.task_object import parse_task_object

if TYPE_CHECKING:
    from certd.authority.labeller import LearnedLabeller, Verify
    from certd.authority.results import CheckedTask
    from certd.ledger.log import Ledger

__all__ = [
    "FitRow",
    "read_rollouts",
    "record_models",
]


@dataclass(frozen=True, slots=True)
class FitRow:
    """One question and the rollouts the operator trusts for it."""

    task: Mapping[str, Any]
    responses: tuple[str, ...]


def read_rollouts(lines: Iterable[str], source: str) -> list[FitRow]:
    """Rows of ``{"task": <task object>, "responses": [...]}`` or ``{"task": …, "response":
    "…"}`` (JSONL), grouped by task in first-seen order.

    Raises:
        InvalidInputError: a line is not JSON or not of that shape (``source:line`` names it).
    """
    groups: dict[str, tuple[Mapping[str, Any], list[str]]] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            task = row["task"]
            got = row["responses"] if "responses" in row else [row["response"]]
        except (ValueError, KeyError, TypeError) as e:
            raise InvalidInputError(
                f"{source}:{n}: expected {{'task': …, 'responses': [...]}} or "
                f"{{'task': …, 'response': '…'}}: {e}",
                field="rollouts",
            ) from e
        if not isinstance(task, Mapping) or not all(isinstance(r, str) for r in got):
            raise InvalidInputError(
                f"{source}:{n}: task must be an object and responses strings", field="rollouts"
            )
        key = json.dumps(task, sort_keys=True)
        groups.setdefault(key, (task, []))[1].extend(got)
    return [FitRow(task, tuple(responses)) for task, responses in groups.values()]


def model_predicate(
    task: CheckedTask, kappa: str, model_sha256: str, clusters: str, steps: str, issued_at: float
) -> dict[str, Any]:
    """The predicate of a kappa-model statement (see the module docstring)."""
    from certd.payloads import sha256_hex

    return {
        "clusters": clusters,
        "clusters_digest": sha256_hex(clusters.encode()),
        "embedding_model_sha256": model_sha256,
        "issued_at": int(issued_at),
        "kappa": kappa,
        "method": str(json.loads(clusters)["method"]),
        "steps": steps,
        "task": task_json(task.pb),
        "task_digest": task.digest,
    }


def record_models(
    rows: Sequence[FitRow],
    *,
    labeller: LearnedLabeller,
    checked: Callable[[Mapping[str, Any]], CheckedTask],
    verify: Callable[[CheckedTask], Verify],
    ledger: Ledger,
    signer: SigningKey,
    clock: Callable[[], float] = time.time,
) -> list[dict[str, Any]]:
    """Fit each row's question and record its model in the ledger (the operator's action).

    A (task, κ) with a recorded model keeps it (``existing``): refitting would change the
    labels of certificates already issued.

    Args:
        rows: the questions and their trusted rollouts.
        labeller: the learned κ of the config (task sets, thresholds, embedder).
        checked: converts a task object to a checked task.
        verify: the domain checker's batch verify for one task.
        ledger: the ledger to record in.
        signer: certd's signing key.
        clock: the ``issued_at`` clock.

    Raises:
        InvalidInputError: a task is not chosen for the learned κ, has no question (math), or
            too few of its rollouts verify CORRECT and write a first step.

    Returns:
        One summary per row: task digest, κ, ledger index, clusters digest, cluster sizes,
        ``existing``.
    """
    out: list[dict[str, Any]] = []
    for row in rows:
        task = checked(row.task)
        task.require_identity("the learned κ")
        kappa = labeller.name_for(task.digest, task.domain)
        if not kappa:
            raise InvalidInputError(
                f"task {task.digest[:16]}…: no learned_kappa task set chooses the learned κ "
                "for it (learned_kappa.task_sets[].kappa: learned)",
                field="rollouts",
            )
        key = model_key(task.digest, kappa)
        found = ledger.find(key)
        if found is not None:
            p = parse_model_entry(ledger.entry(found)) or {}
            out.append(_summary(task.digest, kappa, found, p, existing=True))
            continue
        model, steps = labeller.fit_model(task.digest, task.domain, row.responses, verify(task))
        p = model_predicate(task, kappa, labeller.model_sha256, model.to_json(), steps, clock())
        (index,) = ledger.append([(key, _signed(p, signer))])
        out.append(_summary(task.digest, kappa, index, p, existing=False))
    return out


def _signed(predicate: Mapping[str, Any], signer: SigningKey) -> bytes:
    statement = make_statement(
        [("task", str(predicate["task_digest"])), ("clusters", str(predicate["clusters_digest"]))],
        PREDICATE_KAPPA_MODEL,
        predicate,
    )
    return sign_envelope(statement, IN_TOTO_PAYLOAD_TYPE, signer).to_json()


def _summary(
    digest: str, kappa: str, index: int, p: Mapping[str, Any], *, existing: bool
) -> dict[str, Any]:
    sizes = json.loads(p["clusters"])["sizes"] if "clusters" in p else []
    return {
        "task_digest": digest,
        "kappa": kappa,
        "ledger_index": index,
        "clusters_digest": p.get("clusters_digest", ""),
        "cluster_sizes": sizes,
        "existing": existing,
    }


def checked_from_object(obj: Mapping[str, Any], convert: Callable[[Any], CheckedTask]) -> Any:
    """A task object (``{"domain": …, "task": {…}}``) parsed and checked (internal)."""
    try:
        pb = parse_task_object(obj, stacklevel=3)
    except ValueError as e:
        raise InvalidInputError(f"rollouts: {e}", field="rollouts") from e
    return convert(pb)
