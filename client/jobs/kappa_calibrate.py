"""Calibrate the learned κ where the truth is known: Countdown's gold κ, and math routes.

Example::

    forkgate kappa-calibrate --out out/kappa            # a few minutes on CPU
    forkgate kappa-calibrate --puzzles 2 --samples 4 --math-problems 1 --math-solutions 4

**Countdown.** The embedded policy samples ``samples`` rollouts for each of ``puzzles`` seeded
puzzles (its own training distribution). Each rollout is verified (``countdown@1.0.0``); its
gold label is ``countdown.first-op.v1`` of the step its ``<think>`` initiates (the answer's
label when it initiates none), and its learned label comes from clustering that question's
first ``<think>`` steps (``certd.kappa``) at each distance threshold of ``sweep``. Per
question: adjusted Rand index against the gold labels, purity, and the number of classes of
each. Pooled over questions: the determinacy proxy W/B (within- over between-family
variance of success, ``certd.domains.kappa_report``) of the gold and of the learned κ, and
the proxy's deviation from the gold (difference and ratio).

**Math.** The generated corpus of ``certd.kappa.math_corpus`` (routes known, slips planted)
is verified with the real math verifier and labelled by the known route, ``math.route.v1``,
``math.first-step.v1`` and the learned κ; the same figures are reported against the route.

This is a research command: it imports the server's pure domain code and the embedding model
lazily (``forkgate[math]``), never at ``import forkgate``. Outputs: ``calibration.json`` (every
figure), ``kappa-calibration.png`` (the plots) and ``kappa-calibration.md`` (the tables).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from certd.atomicfile import write_atomic

__all__ = ["CalibrationOptions", "calibrate", "write_outputs"]

_SWEEP = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)


@dataclass
class CalibrationOptions:
    """The calibration's size and settings (defaults: a few minutes on 2 shared cores).

    Attributes:
        puzzles: Countdown puzzles, drawn from the policy's training distribution.
        samples: rollouts per puzzle.
        seed: seeds the puzzles, the sampling and the math corpus.
        temperature: sampling temperature of the policy.
        max_tokens: generation budget per rollout.
        threshold: the learned κ's distance threshold on Countdown (chosen on seed 7:
            the largest threshold within 0.05 of the best mean ARI against the gold).
        math_threshold: the same rule's choice on the math corpus (seed 7).
        sweep: thresholds whose figures are plotted.
        math_problems: generated problems per math family.
        math_solutions: worked solutions per math problem.
    """

    puzzles: int = 96
    samples: int = 32
    seed: int = 20261203
    temperature: float = 1.0
    max_tokens: int = 80
    threshold: float = 0.2
    math_threshold: float = 0.4
    sweep: tuple[float, ...] = field(default=_SWEEP)
    math_problems: int = 8
    math_solutions: int = 24


def _partition_figures(
    by_task: Mapping[str, Sequence[tuple[str, str, float]]],
) -> dict[str, Any]:
    """Per-question ARI, purity and class counts of (gold, predicted, success) rows."""
    from certd.kappa import adjusted_rand_index, purity

    aris, purities, gold_classes, classes = [], [], [], []
    for rows in by_task.values():
        gold = [g for g, _, _ in rows]
        pred = [p for _, p, _ in rows]
        aris.append(adjusted_rand_index(gold, pred))
        purities.append(purity(pred, gold))
        gold_classes.append(len(set(gold)))
        classes.append(len(set(pred)))
    return {
        "questions": len(aris),
        "ari_mean": round(statistics.fmean(aris), 4),
        "ari_median": round(statistics.median(aris), 4),
        "purity_mean": round(statistics.fmean(purities), 4),
        "gold_classes_mean": round(statistics.fmean(gold_classes), 3),
        "classes_mean": round(statistics.fmean(classes), 3),
        "ari_per_question": [round(a, 4) for a in aris],
    }


def _determinacy(by_task: Mapping[str, Sequence[tuple[str, float]]]) -> dict[str, Any]:
    """W/B report of (label, success) rows per task, plus W/B over its random baseline."""
    from certd.domains.kappa_report import Rollout, determinacy

    report = determinacy(
        Rollout(task, label, success) for task, rows in by_task.items() for label, success in rows
    ).as_dict()
    ratio, base = report["ratio"], report["random_label_baseline"]
    report["ratio_over_baseline"] = (
        None if ratio is None or not base else round(float(str(ratio)) / float(str(base)), 4)
    )
    return report


def _deviation(gold: Mapping[str, Any], learned: Mapping[str, Any]) -> dict[str, Any]:
    """How far the learned κ's proxy lies from the gold κ's (raw and baseline-normalised)."""
    out: dict[str, Any] = {}
    for key in ("ratio", "ratio_over_baseline"):
        g, x = gold.get(key), learned.get(key)
        if g is None or x is None:
            out[key] = None
            continue
        g, x = float(g), float(x)
        out[key] = {
            "gold": g,
            "learned": x,
            "difference": round(x - g, 4),
            "relative": None if g == 0 else round((x - g) / g, 4),
        }
    out["same_verdict"] = gold["verdict"] == learned["verdict"]
    return out


def _countdown_rollouts(opts: CalibrationOptions) -> list[tuple[str, str, str, str, float]]:
    """(task, response, gold initiated label, gold answer label, success) per rollout."""
    from certd.domains import countdown as cd

    from ..puzzles import small_countdown_puzzles
    from .policy import Policy
    from .policy.format import compact_prompt

    policy = Policy.load()
    dist = policy.meta.get("puzzle_distribution", {})
    puzzles = small_countdown_puzzles(
        opts.puzzles,
        seed=opts.seed,
        sizes=tuple(dist.get("sizes", (3, 4))),
        max_number=int(dist.get("max_number", 12)),
        target_range=tuple(dist.get("target_range", (1, 100))),
    )
    groups = policy.sample(
        [compact_prompt(p) for p in puzzles],
        n=opts.samples,
        max_tokens=opts.max_tokens,
        temperature=opts.temperature,
        seed=opts.seed,
    )
    rows = []
    for i, (p, group) in enumerate(zip(puzzles, groups, strict=True)):
        task = cd.CountdownTask(numbers=tuple(p["numbers"]), target=int(p["target"]))
        for s in group:
            v = cd.verify_countdown(task, s.text)
            answer = v.family.label if v.family is not None else "(none)"
            initiated = v.initiated.label if v.initiated is not None else answer
            ok = 1.0 if v.status.name == "CORRECT" else 0.0
            rows.append((f"cd-{i}", s.text, initiated, answer, ok))
    return rows


class _Vectors:
    """The embedder with a cache: every distinct step is embedded once per run."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.cache: dict[str, list[float]] = {}

    def of(self, steps: Sequence[str]) -> dict[str, list[float]]:
        todo = sorted({s for s in steps if s not in self.cache})
        if todo:
            self.cache.update(zip(todo, self.embedder.embed(todo), strict=True))
        return self.cache


def _learned_labels(
    vectors: _Vectors, task_steps: Mapping[str, Sequence[str | None]], threshold: float
) -> dict[str, list[str]]:
    """Each question's learned labels at ``threshold`` (one embedding pass for all steps)."""
    from certd.kappa import NO_STEP, ClusterParams, assign, fit_clusters

    params = ClusterParams(distance_threshold=threshold)
    cache = vectors.of([s for steps in task_steps.values() for s in steps if s is not None])
    out: dict[str, list[str]] = {}
    for task, steps in task_steps.items():
        present = [s for s in steps if s is not None]
        if not present:
            out[task] = [NO_STEP] * len(steps)
            continue
        model = fit_clusters(present, [cache[s] for s in present], params)
        out[task] = [NO_STEP if s is None else assign(model, cache[s]) for s in steps]
    return out


def _first_operation(step: str | None) -> str:
    """The whole first operation ``a∘b`` of a ``<think>`` step (a finer reference than gold)."""
    import re

    m = re.match(r"\s*(\d+)\s*([-+*/])\s*(\d+)", step or "")
    return "".join(m.groups()) if m else "(none)"


def _countdown_section(vectors: _Vectors, opts: CalibrationOptions) -> dict[str, Any]:
    """Countdown: learned κ against gold ``countdown.first-op.v1``, at each threshold."""
    from certd.kappa.steps import countdown_first_step

    rows = _countdown_rollouts(opts)
    by_task: dict[str, list[tuple[str, str, str, float]]] = defaultdict(list)
    for task, text, initiated, answer, ok in rows:
        by_task[task].append((text, initiated, answer, ok))
    steps = {t: [countdown_first_step(r[0]) for r in rs] for t, rs in by_task.items()}
    first_op = {t: [_first_operation(s) for s in ss] for t, ss in steps.items()}

    def labelled(labels: Mapping[str, Sequence[str]]) -> dict[str, list[tuple[str, float]]]:
        return {
            t: [(lab, r[3]) for lab, r in zip(labels[t], rs, strict=True)]
            for t, rs in by_task.items()
        }

    def against(
        gold: Mapping[str, Sequence[str]], labels: Mapping[str, Sequence[str]]
    ) -> dict[str, Any]:
        return _partition_figures(
            {
                t: list(zip(gold[t], labels[t], [r[3] for r in rs], strict=True))
                for t, rs in by_task.items()
            }
        )

    gold_labels = {t: [r[1] for r in rs] for t, rs in by_task.items()}
    gold_init = _determinacy(labelled(gold_labels))
    gold_answer = _determinacy(labelled({t: [r[2] for r in rs] for t, rs in by_task.items()}))
    sweep = []
    for threshold in sorted({*opts.sweep, opts.threshold}):
        labels = _learned_labels(vectors, steps, threshold)
        learned = _determinacy(labelled(labels))
        sweep.append(
            {
                "threshold": threshold,
                "agreement": against(gold_labels, labels),
                "agreement_first_operation": against(first_op, labels),
                "determinacy": learned,
                "deviation": _deviation(gold_init, learned),
            }
        )
    successes = [r[4] for r in rows]
    with_step = sum(s is not None for ss in steps.values() for s in ss)
    return {
        "rollouts": len(rows),
        "questions": len(by_task),
        "pass_at_1": round(statistics.fmean(successes), 4),
        "rollouts_with_step": with_step,
        "gold_initiated": gold_init,
        "gold_answer": gold_answer,
        "first_operation": _determinacy(labelled(first_op)),
        "first_operation_vs_gold": against(gold_labels, first_op),
        "sweep": sweep,
        "examples": [r[1][:80] for r in rows[:4]],
    }


def _math_section(vectors: _Vectors, opts: CalibrationOptions) -> dict[str, Any]:
    """Math: the three κs against the generated corpus's known routes."""
    from certd.domains.math import MathTask, route_of
    from certd.domains.math.first_step import first_step_text
    from certd.domains.math.verify import verify_math
    from certd.kappa.math_corpus import math_corpus

    rows = math_corpus(
        problems_per_family=opts.math_problems, solutions=opts.math_solutions, seed=opts.seed
    )
    ok = [
        1.0 if verify_math(MathTask(gold=r.gold), r.response).status.name == "CORRECT" else 0.0
        for r in rows
    ]
    steps = [first_step_text(r.response) for r in rows]
    moves = vectors.embedder.moves(steps)
    by_problem: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_problem[r.problem].append(i)
    kappas = {
        "known route (gold)": [r.route for r in rows],
        "math.route.v1": [route_of(r.response) for r in rows],
        "math.first-step.v1": list(moves),
    }
    task_steps = {p: [steps[i] for i in ix] for p, ix in by_problem.items()}
    for threshold in sorted({*opts.sweep, opts.math_threshold}):
        learned = _learned_labels(vectors, task_steps, threshold)
        at = {i: lab for p, ix in by_problem.items() for i, lab in zip(ix, learned[p], strict=True)}
        mark = " (default)" if threshold == opts.math_threshold else ""
        kappas[f"learned, threshold {threshold:g}{mark}"] = [at[i] for i in range(len(rows))]
    out: dict[str, Any] = {
        "rollouts": len(rows),
        "problems": len(by_problem),
        "pass_at_1": round(statistics.fmean(ok), 4),
        "kappas": {},
    }
    for name, labels in kappas.items():
        det = _determinacy({p: [(labels[i], ok[i]) for i in ix] for p, ix in by_problem.items()})
        agree = _partition_figures(
            {p: [(rows[i].route, labels[i], ok[i]) for i in ix] for p, ix in by_problem.items()}
        )
        out["kappas"][name] = {"determinacy": det, "agreement_with_route": agree}
    return out


def calibrate(opts: CalibrationOptions, kappa: Any = None) -> dict[str, Any]:
    """Run both sections and return every figure.

    Args:
        opts: sizes and settings.
        kappa: a ``certd.kappa.LearnedKappa`` (default: the packaged model, loaded here).

    Raises:
        ConfigError: the embedding model is not installed.

    Returns:
        The report (JSON-ready).
    """
    from certd.kappa import ClusterParams, LearnedKappa, kappa_learned_name

    params = ClusterParams(distance_threshold=opts.threshold)
    math_params = ClusterParams(distance_threshold=opts.math_threshold)
    if kappa is None:
        kappa = LearnedKappa.load("countdown", params)
    vectors = _Vectors(kappa.embedder)
    sha = kappa.embedder.model_sha256
    return {
        "options": asdict(opts),
        "kappas": {
            "countdown": kappa_learned_name("countdown", sha, params),
            "math": kappa_learned_name("math", sha, math_params),
        },
        "countdown": _countdown_section(vectors, opts),
        "math": _math_section(vectors, opts),
    }


def write_outputs(report: Mapping[str, Any], out: Path) -> list[Path]:
    """Write ``calibration.json``, ``kappa-calibration.png`` and ``kappa-calibration.md``.

    Returns:
        The paths written.
    """
    from .kappa_calibrate_report import markdown, plot

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "calibration.json", out / "kappa-calibration.png", out / "kappa-calibration.md"]
    write_atomic(paths[0], (json.dumps(report, indent=1) + "\n").encode(), mode=0o644)
    plot(report, paths[1])
    write_atomic(paths[2], markdown(report).encode("utf-8"), mode=0o644)
    return paths


def _cmd(args: Any) -> int:
    """``forkgate kappa-calibrate``: run, write the outputs, print the tables."""
    import sys

    from certd.errors import CertdError

    opts = CalibrationOptions(
        puzzles=args.puzzles,
        samples=args.samples,
        seed=args.seed,
        threshold=args.threshold,
        math_threshold=args.math_threshold,
        math_problems=args.math_problems,
        math_solutions=args.math_solutions,
    )
    try:
        report = calibrate(opts)
    except CertdError as e:
        print(f"forkgate: error: {e}", file=sys.stderr)
        return 2
    paths = write_outputs(report, Path(args.out))
    if args.json:
        print(json.dumps(report))
    else:
        print(paths[2].read_text(encoding="utf-8"))
        print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def add_parser(sub: Any) -> None:
    """Add ``kappa-calibrate`` to the ``forkgate`` command line (``sub``: its subparsers)."""
    d = CalibrationOptions()
    k = sub.add_parser(
        "kappa-calibrate",
        help="calibrate the learned κ against Countdown's gold κ and known math routes",
    )
    k.add_argument("--out", default="out/kappa-calibration", help="output folder")
    k.add_argument("--puzzles", type=int, default=d.puzzles, help="Countdown questions")
    k.add_argument("--samples", type=int, default=d.samples, help="rollouts per question")
    k.add_argument("--seed", type=int, default=d.seed)
    k.add_argument("--threshold", type=float, default=d.threshold, help="Countdown threshold")
    k.add_argument("--math-threshold", type=float, default=d.math_threshold, help="math's")
    k.add_argument("--math-problems", type=int, default=d.math_problems, help="per family")
    k.add_argument("--math-solutions", type=int, default=d.math_solutions, help="per problem")
    k.add_argument("--json", action="store_true", help="print the report as JSON")
    k.set_defaults(fn=_cmd)
