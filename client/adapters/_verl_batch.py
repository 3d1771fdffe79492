"""The verl adapter's batch columns, admission and guard (numpy only, no verl import).

Example::

    refusals = admit_batch(batch, ratchet)   # groups by (task, family); refused rows REFUSED
    stratify_uids(batch)                     # the family labels travel in the group index
    restore_uids(batch)                      # after compute_advantage

``forkgate.adapters.verl`` re-exports everything here; see its docstring and docs/adapters.md.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
from google.protobuf import json_format

from certd.statements import task_json

from ..connection import Connection, split_addresses
from ..ratchet import Admission, Ratchet
from ._guard import LeftOutCounts, LeftOutGuard
from ._scoring import Scored, Scorer

__all__ = [
    "ENTRY_TOKENS_KEY",
    "ESTIMATOR_NAME",
    "FAMILY_KEY",
    "QUESTION_KEY",
    "ROLLOUT_KEY",
    "STATUS_KEY",
    "admit_batch",
    "bind_ratchet",
    "guard_batch",
    "mark_entry_tokens",
    "restore_uids",
    "stratify_uids",
]

ESTIMATOR_NAME = "forkgate_stratified"
FAMILY_KEY = "forkgate_family"
QUESTION_KEY = "forkgate_question"
STATUS_KEY = "forkgate_status"
ROLLOUT_KEY = "forkgate_rollout"
ENTRY_TOKENS_KEY = "forkgate_entry_tokens"
_LEFT_OUT = frozenset({"INFRA_ERROR", "REFUSED"})  # statuses that carry no training signal
_UID_KEY = "forkgate_uid"
_SEP = "\x1f"  # ASCII unit separator: never in a task digest, a uid or a κ label

_scorers: dict[tuple[Connection, tuple[str, ...], float], Scorer] = {}


def _scorer(conn: Connection, trusted_keys: Sequence[str] | None, linger_s: float) -> Scorer:
    """The process's scorer for (connection, keys, linger): one batching client each."""
    keys = tuple(str(k) for k in trusted_keys) if trusted_keys is not None else ()
    scorer = _scorers.get((conn, keys, linger_s))
    if scorer is None:
        scorer = _scorers[(conn, keys, linger_s)] = Scorer(
            conn,
            trusted_keys=list(keys) if trusted_keys is not None else None,
            linger_s=linger_s,
        )
    return scorer


def _score_dict(s: Scored, keep_rollout: bool) -> dict[str, Any]:
    """``compute_score``'s result for one scored response."""
    out: dict[str, Any] = {
        "score": 0.0 if s.reward is None else s.reward,
        "acc": s.status == "CORRECT",
        FAMILY_KEY: s.family or "",
        QUESTION_KEY: s.question,
        STATUS_KEY: s.status,
    }
    if keep_rollout:
        out[ROLLOUT_KEY] = _rollout_json(s)
    return out


def _rollout_json(s: Scored) -> str:
    if s.verdict is None or s.receipt is None or s.task is None:
        return ""
    return json.dumps(
        {
            "response": s.response,
            "task": task_json(s.task),
            "verdict": json_format.MessageToDict(s.verdict),
            "receipt": json_format.MessageToDict(s.receipt),
        },
        sort_keys=True,
    )


def bind_ratchet(
    ratchet: Ratchet,
    certd_address: str | Sequence[str] | Connection | None = None,
    trusted_keys: Sequence[str] | None = None,
) -> Ratchet:
    """Give a ratchet built without ``consistency=`` certd's consistency proofs.

    The connection is ``compute_score``'s (same address, same ``FORKGATE_*`` defaults), so
    the ratchet follows the log that signs the batch's receipts from one step to the next.

    Returns:
        The ratchet.
    """
    conn = (
        certd_address
        if isinstance(certd_address, Connection)
        else Connection.from_env(
            addresses=split_addresses(certd_address) if certd_address else None
        )
    )
    return _scorer(conn, trusted_keys, 0.02).bind(ratchet)


def guard_batch(
    data: Any, guard: LeftOutGuard, refusals: Sequence[Admission] = ()
) -> LeftOutCounts:
    """Count a scored batch's refused and unscored rows; raise when training would stall.

    Args:
        data: a verl ``DataProto`` scored by ``compute_score`` (after ``admit_batch``).
        guard: the limits (``LeftOutGuard``).
        refusals: ``admit_batch``'s refusals (their reasons go into the error).

    Raises:
        KeyError: the batch has no ``forkgate_status`` column.
        TrainingStalledError: the batch, or the run of batches, trains on too little.

    Returns:
        The counts (also logged by the ``forkgate.adapters`` logger).
    """
    nt = data.non_tensor_batch
    if STATUS_KEY not in nt:
        raise KeyError(f"non_tensor_batch lacks {STATUS_KEY!r}: score with forkgate compute_score")
    return guard.check([str(s) for s in nt[STATUS_KEY]], refusals)


def admit_batch(
    data: Any,
    ratchet: Ratchet,
    *,
    guard: LeftOutGuard | None = None,
    certd_address: str | Sequence[str] | Connection | None = None,
) -> list[Admission]:
    """Run a scored batch through the ratchet as stratified groups; leave refused rows out.

    The rows are grouped by (task, family) into ``forkgate.groups`` records; the rows of a
    refused group get status ``"REFUSED"`` in ``forkgate_status``, so ``stratify_uids`` and
    the estimator give them advantage 0 and keep them out of the prior. Rows without a
    rollout (an infrastructure failure) are already left out. A ratchet without a
    consistency source gets certd's (``bind_ratchet``), so it follows the log past step 1.

    Args:
        data: a verl ``DataProto`` scored with ``certd_keep_rollouts=True``.
        ratchet: the ratchet to admit the groups through.
        guard: counts the batch (``guard_batch``) after admission and raises when training
            would stall; None: ``LeftOutGuard()`` (raise when every row is left out, or on
            3 consecutive batches with refusals). Keep one guard across steps.
        certd_address: certd for consistency proofs (as ``compute_score``'s
            ``certd_address``; default ``$FORKGATE_SERVER`` or 127.0.0.1:50051).

    Raises:
        KeyError: the batch has no ``forkgate_rollout`` column.
        TrainingStalledError: from the guard.

    Returns:
        The refusals.
    """
    if ratchet.consistency is None:
        bind_ratchet(ratchet, certd_address)
    refusals = _admit(data, ratchet)
    guard_batch(data, guard if guard is not None else _default_guard(ratchet), refusals)
    return refusals


_guards: weakref.WeakKeyDictionary[Ratchet, LeftOutGuard] = weakref.WeakKeyDictionary()


def _default_guard(ratchet: Ratchet) -> LeftOutGuard:
    """One default guard per ratchet, so the streak of refusing batches is counted."""
    return _guards.setdefault(ratchet, LeftOutGuard())


def _admit(data: Any, ratchet: Ratchet) -> list[Admission]:
    nt = data.non_tensor_batch
    if ROLLOUT_KEY not in nt:
        raise KeyError(f"non_tensor_batch lacks {ROLLOUT_KEY!r}: score with certd_keep_rollouts")
    members: dict[tuple[str, str], list[int]] = {}
    parsed: dict[int, dict[str, Any]] = {}
    for i, text in enumerate(nt[ROLLOUT_KEY]):
        if text and nt[STATUS_KEY][i] not in _LEFT_OUT:
            parsed[i] = json.loads(text)
            members.setdefault((str(nt[QUESTION_KEY][i]), str(nt[FAMILY_KEY][i])), []).append(i)
    statuses = np.array(nt[STATUS_KEY], dtype=object)
    refusals = []
    for (_, family), rows in members.items():
        record = {
            "task": parsed[rows[0]]["task"],
            "family": family,
            "rollouts": [
                {k: parsed[i][k] for k in ("response", "verdict", "receipt")} for i in rows
            ],
        }
        admission = ratchet.admit(record)
        if not admission.admitted:
            refusals.append(admission)
            statuses[rows] = "REFUSED"
    nt[STATUS_KEY] = statuses
    return refusals


def stratify_uids(data: Any) -> None:
    """Put each row's (question, family, left-out) key into ``uid`` for the estimator.

    Args:
        data: a verl ``DataProto`` whose ``non_tensor_batch`` has the ``forkgate_*`` columns
            ``compute_score`` returned.

    Raises:
        KeyError: a ``forkgate_*`` column is missing.
    """
    nt = data.non_tensor_batch
    missing = [k for k in (FAMILY_KEY, QUESTION_KEY, STATUS_KEY) if k not in nt]
    if missing:
        raise KeyError(f"non_tensor_batch lacks {missing}: score with forkgate compute_score")
    if _UID_KEY not in nt and "uid" in nt:
        nt[_UID_KEY] = nt["uid"]
    keys = [
        _SEP.join((str(q), str(f), "1" if s in _LEFT_OUT else "0"))
        for q, f, s in zip(nt[QUESTION_KEY], nt[FAMILY_KEY], nt[STATUS_KEY], strict=True)
    ]
    if ENTRY_TOKENS_KEY in nt:  # the entry length travels too (mark_entry_tokens)
        keys = [f"{k}{_SEP}{int(n)}" for k, n in zip(keys, nt[ENTRY_TOKENS_KEY], strict=True)]
    nt["uid"] = np.array(keys, dtype=object)


def mark_entry_tokens(data: Any, entry_tokens: Any) -> None:
    """Record each response's entry length (leading tokens) for ``entry_unscored``.

    Args:
        data: a verl ``DataProto`` with ``batch["responses"]`` (token ids).
        entry_tokens: a function of one response's token ids (a list) giving how many leading
            tokens are its entry.

    Raises:
        KeyError: the batch has no ``responses``.
    """
    responses = data.batch["responses"]
    counts = [max(0, int(entry_tokens(row.tolist()))) for row in responses]
    data.non_tensor_batch[ENTRY_TOKENS_KEY] = np.array(counts, dtype=object)


def restore_uids(data: Any) -> None:
    """Put back the ``uid`` column ``stratify_uids`` replaced."""
    nt = data.non_tensor_batch
    if _UID_KEY in nt:
        nt["uid"] = nt.pop(_UID_KEY)
