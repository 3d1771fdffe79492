"""What an acceptance decision is, and how it is written to and read from the ledger.

Example:
    >>> d = Drop("band-4", "best_at_k", 0.81, 0.62, 0.10, Interval(-0.19, -0.30, -0.09, 0.95))
    >>> describe_drop(d).split(" (change")[0]
    'band-4: best_at_k fell 0.190 (0.810 -> 0.620), tolerance 0.100'
    >>> refusal_reason(d)
    'CAPABILITY_FELL'

Pure: dataclasses, the checks of an evaluation's samples, and their JSON (the predicates a
decision is signed as); ``certd.authority.regressions`` decides, ``certd.authority.acceptances``
signs and logs.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from certd.authority.results import CheckedTask, Proven
from certd.effective_support import Interval, PromptOutcome, SupportChange, SupportFigures
from certd.errors import InvalidInputError, LimitExceededError
from certd.opening import PREDICATE_ACCEPTANCE, PREDICATE_ACCEPTANCE_REFUSAL
from certd.payloads import sha256_hex

__all__ = [
    "AcceptanceDecision",
    "Capability",
    "Challenge",
    "DecisionPage",
    "Drop",
    "TaskSetSpec",
    "check_digest",
    "check_run",
    "check_samples",
    "decision_of",
    "decision_predicate",
    "describe_drop",
    "drop_json",
    "drop_of",
    "parse_acceptance_entry",
    "refusal_reason",
    "spec_json",
]

_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class TaskSetSpec:
    """A capability's declaration (what ``TaskSetConfig`` and ``RegisterTaskSet`` carry)."""

    name: str
    k: int
    prompts: int = 0
    tolerance_best_at_k: float = 0.05
    tolerance_pass_at_1: float = 0.10
    min_improvement: float = 0.0
    route_kappa: str = "math.route.v1"
    route_field: str = ""


@dataclass(frozen=True, slots=True)
class Capability:
    """One task set's figures in a decision, and its change from the previous certificate."""

    task_set: str
    figures: SupportFigures
    outcomes: tuple[PromptOutcome, ...]
    change: SupportChange | None = None


@dataclass(frozen=True, slots=True)
class Drop:
    """A capability that fell past its tolerance (or a target that did not improve)."""

    task_set: str
    metric: str
    previous: float
    now: float
    tolerance: float
    interval: Interval  # of the change (now - previous)
    against: str = "previous"  # or "baseline": the run's first certificate

    @property
    def drop(self) -> float:
        """previous - now."""
        return self.previous - self.now


@dataclass(frozen=True, slots=True)
class AcceptanceDecision:
    """An accepted certificate (durable), or a refusal with its drops."""

    run: str
    checkpoint: str
    checkpoint_digest: str
    target: str
    sequence: int
    capabilities: tuple[Capability, ...]
    accepted: bool
    index: int = -1
    envelope: bytes = field(default=b"", repr=False)
    reason: str = ""
    detail: str = ""
    drops: tuple[Drop, ...] = ()

    @property
    def certificate_id(self) -> str:
        """Hex SHA-256 of the envelope (the certificate, or the signed refusal record)."""
        return sha256_hex(self.envelope) if self.envelope else ""


@dataclass(frozen=True, slots=True)
class DecisionPage:
    """A run's decisions in ledger order, each with its inclusion proof (all in one
    checkpoint); ``next_after``, the last one's ledger index, when there are more."""

    run: str
    decisions: list[Proven[AcceptanceDecision]]
    next_after: int | None = None


def parse_acceptance_entry(index: int, entry: bytes) -> AcceptanceDecision | None:
    """Parse a ledger entry as an acceptance certificate or refusal record, unchecked.

    The ledger is certd's own (``certd audit`` checks every signature); entries of other
    kinds and unparseable ones give None.
    """
    try:
        env = json.loads(entry)
        st = json.loads(base64.b64decode(env["payload"]))
        if st.get("predicateType") not in (PREDICATE_ACCEPTANCE, PREDICATE_ACCEPTANCE_REFUSAL):
            return None
        p = st["predicate"]
        caps = tuple(
            Capability(
                task_set=str(name),
                figures=SupportFigures.from_json(c["figures"]),
                outcomes=tuple(PromptOutcome(str(d), int(n), int(k)) for d, n, k in c["outcomes"]),
                change=SupportChange.from_json(c["change"]) if c.get("change") else None,
            )
            for name, c in dict(p["capabilities"]).items()
        )
        return AcceptanceDecision(
            run=str(p["run"]),
            checkpoint=str(p["checkpoint"]["name"]),
            checkpoint_digest=str(p["checkpoint"]["digest"]),
            target=str(p["target"]),
            sequence=int(p["sequence"]),
            capabilities=caps,
            accepted="refusal" not in p,
            index=index,
            envelope=entry,
            reason=str(p["refusal"]["reason"]) if "refusal" in p else "",
            detail=str(p["refusal"]["detail"]) if "refusal" in p else "",
            drops=tuple(drop_of(d) for d in p["refusal"]["drops"]) if "refusal" in p else (),
        )
    except (ValueError, KeyError, TypeError):
        return None


def drop_json(d: Drop) -> dict[str, Any]:
    """A drop as JSON (the refusal record's ``drops``)."""
    return {
        "against": d.against,
        "interval": d.interval.to_json(),
        "metric": d.metric,
        "now": d.now,
        "previous": d.previous,
        "task_set": d.task_set,
        "tolerance": d.tolerance,
    }


def drop_of(obj: Mapping[str, Any]) -> Drop:
    """Read ``drop_json``'s object back.

    Raises:
        KeyError, TypeError, ValueError: the object is malformed.
    """
    return Drop(
        str(obj["task_set"]),
        str(obj["metric"]),
        float(obj["previous"]),
        float(obj["now"]),
        float(obj["tolerance"]),
        Interval.from_json(obj["interval"]),
        str(obj.get("against", "previous")),
    )


def spec_json(spec: TaskSetSpec) -> dict[str, Any]:
    """A task set's declaration as JSON (its digest and the certificate's ``tolerances``)."""
    return {
        "k": spec.k,
        "min_improvement": spec.min_improvement,
        "prompts": spec.prompts,
        "route_field": spec.route_field,
        "route_kappa": spec.route_kappa,
        "tolerance_best_at_k": spec.tolerance_best_at_k,
        "tolerance_pass_at_1": spec.tolerance_pass_at_1,
    }


def refusal_reason(drop: Drop) -> str:
    """The refusal code of a drop."""
    return "TARGET_NOT_IMPROVED" if drop.metric == "target_pass_at_1" else "CAPABILITY_FELL"


def describe_drop(d: Drop) -> str:
    """One line: which capability fell, by how much, from what, with the interval."""
    iv = d.interval
    where = f" (change {iv.estimate:+.3f}, {iv.level:.0%} CI [{iv.low:+.3f}, {iv.high:+.3f}])"
    if d.metric == "target_pass_at_1":
        return (
            f"target {d.task_set}: pass@1 {d.previous:.3f} -> {d.now:.3f} did not rise by more "
            f"than {d.tolerance:.3f}{where}"
        )
    since = "" if d.against == "previous" else f" since the run's {d.against}"
    return (
        f"{d.task_set}: {d.metric} fell {d.drop:.3f}{since} ({d.previous:.3f} -> {d.now:.3f}), "
        f"tolerance {d.tolerance:.3f}{where}"
    )


@dataclass(frozen=True, slots=True)
class Challenge:
    """An open evaluation: the prompts certd drew, per task set."""

    evaluation_id: str
    run: str
    checkpoint: str
    checkpoint_digest: str
    target: str
    seed: int
    predecessor: str
    sequence: int
    sets: tuple[tuple[str, int, tuple[CheckedTask, ...]], ...]  # (name, k, prompts)
    opened_at: float


def check_run(run: str) -> None:
    """A run name: 1..128 printable characters without '/' (it is part of ledger keys).

    Raises:
        InvalidInputError: it is not.
    """
    if not run or len(run) > 128 or "/" in run or not run.isprintable():
        raise InvalidInputError(
            f"run: expected 1..128 printable characters without '/', got {run!r}", field="run"
        )


def check_digest(digest: str) -> None:
    """A checkpoint digest: 64 lowercase hex digits.

    Raises:
        InvalidInputError: it is not.
    """
    if len(digest) != 64 or not set(digest) <= _HEX:
        raise InvalidInputError(
            f"checkpoint_digest: expected 64 lowercase hex digits, got {digest!r:.80}",
            field="checkpoint_digest",
        )


def check_samples(
    challenge: Challenge, samples: Mapping[str, Sequence[Sequence[str]]], max_samples: int
) -> None:
    """Check that ``samples`` answer ``challenge``: every set, every prompt, exactly k each.

    Raises:
    InvalidInputError: a set, a prompt or a response is missing or extra.
    LimitExceededError: more than ``max_samples`` samples.
    """
    expected = {name for name, _, _ in challenge.sets}
    if set(samples) != expected:
        raise InvalidInputError(
            f"evaluation: expected samples for {sorted(expected)}, got {sorted(samples)}",
            field="evaluation",
        )
    total = 0
    for name, k, prompts in challenge.sets:
        got = samples[name]
        if len(got) != len(prompts):
            raise InvalidInputError(
                f"evaluation[{name}]: expected {len(prompts)} prompts, got {len(got)}",
                field="evaluation",
            )
        for i, responses in enumerate(got):
            if len(responses) != k:
                raise InvalidInputError(
                    f"evaluation[{name}].prompts[{i}]: expected {k} responses, "
                    f"got {len(responses)}",
                    field="evaluation",
                )
        total += k * len(prompts)
    if total > max_samples:
        raise LimitExceededError(
            f"samples: at most {max_samples}, got {total}",
            field="evaluation",
        )


def decision_predicate(
    challenge: Challenge,
    caps: Sequence[Capability],
    sets: Mapping[str, tuple[str, TaskSetSpec]],
    verifiers: Sequence[str],
    issued_at: int,
    refusal: tuple[str, str, Sequence[Drop]] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The predicate type and predicate of a decision on ``challenge`` (formats.md).

    Args:
        challenge: the evaluation decided on.
        caps: its capabilities, compared with the run's head.
        sets: per task set name, its digest and declaration.
        verifiers: the verifiers that checked the samples (name@version), sorted.
        issued_at: seconds since the epoch.
        refusal: (reason, detail, drops) for a refusal record; None for a certificate.
    """
    predicate: dict[str, Any] = {
        "capabilities": {
            c.task_set: {
                "change": c.change.to_json() if c.change is not None else None,
                "figures": c.figures.to_json(),
                "outcomes": [[o.prompt, o.n, o.c] for o in c.outcomes],
                "task_set_digest": sets[c.task_set][0],
                "tolerances": spec_json(sets[c.task_set][1]),
            }
            for c in caps
        },
        "checkpoint": {"digest": challenge.checkpoint_digest, "name": challenge.checkpoint},
        "issued_at": issued_at,
        "predecessor": challenge.predecessor,
        "run": challenge.run,
        "seed": challenge.seed,
        "sequence": challenge.sequence,
        "target": challenge.target,
        "verifiers": list(verifiers),
    }
    if refusal is None:
        return PREDICATE_ACCEPTANCE, predicate
    reason, detail, drops = refusal
    predicate["refusal"] = {
        "detail": detail,
        "drops": [drop_json(d) for d in drops],
        "reason": reason,
    }
    return PREDICATE_ACCEPTANCE_REFUSAL, predicate


def decision_of(
    challenge: Challenge,
    caps: tuple[Capability, ...],
    index: int,
    envelope: bytes,
    *,
    accepted: bool,
    reason: str = "",
    detail: str = "",
    drops: tuple[Drop, ...] = (),
) -> AcceptanceDecision:
    """A logged decision on ``challenge``: accepted, or refused with its reason and drops."""
    return AcceptanceDecision(
        run=challenge.run,
        checkpoint=challenge.checkpoint,
        checkpoint_digest=challenge.checkpoint_digest,
        target=challenge.target,
        sequence=challenge.sequence,
        capabilities=caps,
        index=index,
        envelope=envelope,
        accepted=accepted,
        reason=reason,
        detail=detail,
        drops=drops,
    )
