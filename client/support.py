"""Support tracking per task and checkpoint: best@k, pass@1, route and family shares, SER.

Example:
    >>> t = SupportTracker(k=2, resamples=200)
    >>> row = t.observe("ckpt-0", "band-a", [[True, False], [False, False]], routes=["+"] * 4)
    >>> row.figures.best_at_k, row.figures.mixed, row.ser is None
    (0.5, 0.5, True)
    >>> row = t.observe("ckpt-1", "band-a", [[True, True], [False, False]], routes=["*"] * 4)
    >>> round(row.ser.estimate, 3), row.figures.all_correct, row.route_jsd > 0
    (0.0, 0.5, True)

Pure: it takes samples' correctness, route and family labels (as certd's verdicts carry them;
``route_of`` reads a verdict's route under a configured κ)
and, where the backend reports them, first-token log-probabilities; it does no I/O. The
figures and their intervals come from ``certd.effective_support`` (the same code certd signs with);
entry entropy and pass@k are ``forkgate.metrics``'. Definitions: docs/support-guard.md.

* **SER** between consecutive checkpoints of a task, with a percentile bootstrap interval over
  prompts (paired when both evaluations used the same prompt ids); ``within_noise`` when the
  best@k change's interval contains 0.
* **first-token JSD** against a reference checkpoint: the Jensen–Shannon divergence (nats)
  between the mean first-token distributions (each sample's top-k log-probabilities
  renormalised over its top k, as ``forkgate.metrics.first_token_entropy`` does).
* **route JSD**: the same divergence between route shares, available whenever routes are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from certd.effective_support import (
    Interval,
    PromptOutcome,
    SupportChange,
    SupportFigures,
    jensen_shannon,
    support_change,
    support_figures,
)
from certd.v1 import verifier_pb2

from .metrics import entry_entropy, pass_at_k

__all__ = [
    "SupportRow",
    "SupportTracker",
    "first_token_distribution",
    "first_token_jsd",
    "format_table",
    "route_of",
]


def route_of(verdict: verifier_pb2.Verdict, kappa: str = "math.route.v1", field: str = "") -> str:
    """The route label of a verdict under ``kappa`` (its family or one of its ``labels``).

    Args:
        verdict: a verdict as certd returned it.
        kappa: the route κ (``math.route.v1``; ``countdown.first-op.v1`` for Countdown bands).
        field: use this label field (e.g. ``operator``) instead of the label value.

    Returns:
        The route, or ``"none"`` when the verdict carries no label under ``kappa``.
    """
    labels = [verdict.family] if verdict.HasField("family") else []
    for label in [*labels, *verdict.labels]:
        if label.kappa == kappa:
            return (label.fields.get(field, "none") if field else label.value) or "none"
    return "none"


def first_token_distribution(top_logprobs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean first-token distribution of samples from their top-k log-probabilities.

    Raises:
        ValueError: no samples, or a sample with no log-probabilities.
    """
    if not top_logprobs:
        raise ValueError("expected at least one sample")
    total: dict[str, float] = {}
    for dist in top_logprobs:
        if not dist:
            raise ValueError("a sample has no first-token log-probabilities")
        top = max(dist.values())
        weights = {t: math.exp(lp - top) for t, lp in dist.items()}
        z = sum(weights.values())
        for t, w in weights.items():
            total[t] = total.get(t, 0.0) + w / z / len(top_logprobs)
    return dict(sorted(total.items()))


def first_token_jsd(
    samples: Sequence[Mapping[str, float]], reference: Sequence[Mapping[str, float]]
) -> float:
    """Jensen–Shannon divergence (nats) between two checkpoints' first-token distributions.

    Raises:
        ValueError: either side has no samples or a sample without log-probabilities.
    """
    return jensen_shannon(first_token_distribution(samples), first_token_distribution(reference))


@dataclass(frozen=True, slots=True)
class SupportRow:
    """One task at one checkpoint.

    Attributes:
        checkpoint: the checkpoint's name.
        task: the task (set) name.
        figures: best@k, pass@1, shares, route and family distributions.
        outcomes: per prompt (id, n, c).
        change: against the previous checkpoint of this task (None for the first).
        route_entropy: entropy (nats) of the samples' routes.
        route_jsd: JSD of route shares against the reference checkpoint (None without routes).
        first_token_jsd: JSD of first-token distributions against the reference (None when
            log-probabilities were not given here or there).
    """

    checkpoint: str
    task: str
    figures: SupportFigures
    outcomes: tuple[PromptOutcome, ...]
    change: SupportChange | None = None
    route_entropy: float = 0.0
    route_jsd: float | None = None
    first_token_jsd: float | None = None

    @property
    def ser(self) -> Interval | None:
        """The support erosion rate since the previous checkpoint, with its interval."""
        return self.change.ser if self.change is not None else None

    @property
    def within_noise(self) -> bool | None:
        """Whether the best@k change is within sampling noise (None for the first)."""
        return self.change.within_noise if self.change is not None else None

    def to_json(self) -> dict[str, Any]:
        """A JSON object (one line of ``forkgate guard --json``; the report's input)."""
        return {
            "change": self.change.to_json() if self.change is not None else None,
            "checkpoint": self.checkpoint,
            "figures": self.figures.to_json(),
            "first_token_jsd": self.first_token_jsd,
            "route_entropy": self.route_entropy,
            "route_jsd": self.route_jsd,
            "task": self.task,
        }


@dataclass
class SupportTracker:
    """Support rows per (task, checkpoint), each compared with the task's previous one.

    Args:
        k: the budget of best@k (every prompt needs at least k samples).
        reference: the checkpoint JSDs are measured against; None: the first one observed.
        resamples: bootstrap resamples of the intervals.
        level: interval coverage.
        seed: the bootstrap seed (results are deterministic).
    """

    k: int
    reference: str | None = None
    resamples: int = 2000
    level: float = 0.95
    seed: int = 0
    rows: list[SupportRow] = field(default_factory=list)
    _first_token: dict[tuple[str, str], list[Mapping[str, float]]] = field(
        default_factory=dict, repr=False
    )

    def observe(
        self,
        checkpoint: str,
        task: str,
        correct: Sequence[Sequence[bool]],
        *,
        routes: Sequence[str] = (),
        families: Sequence[str] = (),
        prompt_ids: Sequence[str] | None = None,
        first_token_logprobs: Sequence[Mapping[str, float]] | None = None,
    ) -> SupportRow:
        """Record one task's evaluation at a checkpoint and compare it with the previous.

        Args:
            checkpoint: the checkpoint's name.
            task: the task (set) name.
            correct: per prompt, each sample's correctness (n >= k per prompt).
            routes: every sample's route label (e.g. a ``math.route.v1`` label).
            families: every sample's entry-family label.
            prompt_ids: per prompt, a stable id (default: its position), for pairing.
            first_token_logprobs: per sample, the first token's top-k log-probabilities.

        Raises:
            ValueError: no prompts, fewer than k samples on a prompt, or ids that do not
                match the prompts.

        Returns:
            The row (also appended to ``rows``).
        """
        outcomes = self._outcomes(correct, prompt_ids)
        figures = support_figures(outcomes, self.k, routes=routes, families=families)
        change = self._change(task, outcomes)
        reference = self.reference or (self.rows[0].checkpoint if self.rows else checkpoint)
        row = SupportRow(
            checkpoint=checkpoint,
            task=task,
            figures=figures,
            outcomes=outcomes,
            change=change,
            route_entropy=entry_entropy(routes),
            route_jsd=self._route_jsd(task, figures, reference),
            first_token_jsd=self._first_token_jsd(
                checkpoint, task, reference, first_token_logprobs
            ),
        )
        self.rows.append(row)
        return row

    def _outcomes(
        self, correct: Sequence[Sequence[bool]], prompt_ids: Sequence[str] | None
    ) -> tuple[PromptOutcome, ...]:
        """Per prompt (id, n, c); ValueError for ids that do not match or n < k."""
        ids = list(prompt_ids) if prompt_ids is not None else [str(i) for i in range(len(correct))]
        if len(ids) != len(correct):
            raise ValueError(f"prompt_ids: expected {len(correct)}, got {len(ids)}")
        outcomes = tuple(
            PromptOutcome(p, len(s), sum(map(bool, s))) for p, s in zip(ids, correct, strict=True)
        )
        for o in outcomes:
            pass_at_k(o.n, o.c, self.k)  # ValueError for n < k, with forkgate.metrics' message
        return outcomes

    def _change(self, task: str, outcomes: tuple[PromptOutcome, ...]) -> SupportChange | None:
        """The change since the task's previous row (None for its first)."""
        previous = self._last(task)
        if previous is None:
            return None
        return support_change(
            previous.outcomes,
            outcomes,
            self.k,
            resamples=self.resamples,
            level=self.level,
            seed=self.seed,
        )

    def _route_jsd(self, task: str, figures: SupportFigures, reference: str) -> float | None:
        """Route shares' JSD against the reference row (against itself when it is the first)."""
        ref_row = next((r for r in self.rows if r.checkpoint == reference and r.task == task), None)
        if not figures.routes or (ref_row is not None and not ref_row.figures.routes):
            return None
        ref_routes = ref_row.figures.routes if ref_row is not None else figures.routes
        return jensen_shannon(figures.routes, ref_routes)

    def _first_token_jsd(
        self,
        checkpoint: str,
        task: str,
        reference: str,
        logprobs: Sequence[Mapping[str, float]] | None,
    ) -> float | None:
        """Remember this row's first-token log-probabilities; their JSD against the
        reference's (None when either has none)."""
        if not logprobs:
            return None
        self._first_token[(checkpoint, task)] = list(logprobs)
        ref_ft = self._first_token.get((reference, task))
        return first_token_jsd(logprobs, ref_ft) if ref_ft else None

    def _last(self, task: str) -> SupportRow | None:
        return next((r for r in reversed(self.rows) if r.task == task), None)

    def latest(self) -> dict[str, SupportRow]:
        """The latest row of every task."""
        out: dict[str, SupportRow] = {}
        for r in self.rows:
            out[r.task] = r
        return out


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def format_table(rows: Sequence[SupportRow]) -> str:
    """The support table (one line per task and checkpoint), as ``forkgate guard`` prints it."""
    head = (
        f"{'task':<10} {'checkpoint':<12} {'best@k':>6} {'pass@1':>6} {'all✓':>5} {'mixed':>5} "
        f"{'all✗':>5} {'SER [CI]':>24} {'noise':>5} {'rJSD':>5} {'ftJSD':>5}  top routes"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        f = r.figures
        ser = r.ser
        ser_text = "-" if ser is None else f"{ser.estimate:+.3f} [{ser.low:+.3f},{ser.high:+.3f}]"
        noise = "-" if r.within_noise is None else ("yes" if r.within_noise else "NO")
        top = sorted(f.routes.items(), key=lambda kv: -kv[1])[:3]
        lines.append(
            f"{r.task:<10} {r.checkpoint:<12} {f.best_at_k:>6.3f} {f.pass_at_1:>6.3f} "
            f"{f.all_correct:>5.2f} {f.mixed:>5.2f} {f.all_wrong:>5.2f} {ser_text:>24} "
            f"{noise:>5} {_fmt(r.route_jsd, '.3f'):>5} {_fmt(r.first_token_jsd, '.3f'):>5}  "
            + " ".join(f"{k}:{v:.2f}" for k, v in top)
        )
    return "\n".join(lines)
