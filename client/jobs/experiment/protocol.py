"""The protocol runner: every (arm, seed) once, one JSON line each, resumable."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ...client import CertdClient
from ...local import LocalCertd
from ...puzzles import small_countdown_puzzles
from . import seeds
from .arm_run import Context, run_one, run_start
from .arms import cov_knobs, parse_arm
from .evaluate import feasible_families
from .frontier import multi_family
from .options import ExperimentOptions

__all__ = ["EC_K", "LEGACY", "config_key", "done_runs", "run_experiment"]

EC_K = 16
"""The K of the records' EC@K."""

# The options that do not change a run's result; every other one enters the configuration key.
_NOT_SIZE = ("workdir", "arms", "seeds", "threads")
LEGACY: dict[str, Any] = {"free_n": 0, "frontier": False, "interp_alphas": (0.25, 0.5, 0.75)}
"""Options added after the first results, with the value that reproduces those runs: at that
value a field stays out of the configuration key, so ``docs/results/exp18`` keeps its key."""


def config_key(opts: ExperimentOptions) -> str:
    """A short hash of the size options: runs of one configuration share it."""
    size = {
        k: v
        for k, v in asdict(opts).items()
        if k not in _NOT_SIZE and not (k in LEGACY and v == LEGACY[k])
    }
    if opts.eval_n > EC_K:
        # EC@16 became the unbiased estimator over eval_n draws (issue 33); with eval_n <= 16
        # it always was, so only runs with more draws start a new configuration.
        size["ec"] = "unbiased"
    return hashlib.sha256(json.dumps(size, sort_keys=True, default=str).encode()).hexdigest()[:12]


def done_runs(path: Path, key: str) -> set[tuple[str, int]]:
    """(arm, seed) pairs already in the results file for this configuration."""
    if not path.exists():
        return set()
    done = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line from an interrupted run: rerun that pair
        if rec.get("config") == key:
            done.add((str(rec["arm"]), int(rec["seed"])))
    return done


def _append(path: Path, rec: Mapping[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _context(client: CertdClient, vkey: str, opts: ExperimentOptions, needs_trees: bool) -> Context:
    from ..policy.policy import Policy
    from .data import admitted_forktrees, natural_pool

    train = small_countdown_puzzles(opts.tasks, seed=seeds.TRAIN_TASKS)
    held = small_countdown_puzzles(opts.eval_tasks, seed=seeds.HELD_OUT_TASKS)
    ctx = Context(client, opts, train, held, [feasible_families(client, t) for t in held])
    if opts.frontier and not multi_family(ctx.held_feasible):
        raise ValueError(
            f"--frontier evaluates the multi-family held-out tasks, and none of the "
            f"{len(held)} (--eval-tasks) has two feasible families: raise --eval-tasks"
        )
    if needs_trees:
        base = Policy.load(None)
        subset = train[: opts.forktree_tasks]
        ctx.forktrees, counts = admitted_forktrees(
            client, base, subset, opts.workdir / "forktrees.jsonl", vkey=vkey,
            budget=opts.forktree_budget, max_tokens=opts.max_tokens, seed=seeds.FORKTREES,
        )  # fmt: skip
        ctx.pool, drawn = natural_pool(
            client, base, subset, n=opts.pool_n, max_tokens=opts.max_tokens, seed=seeds.POOL
        )
        ctx.by_task = {json.dumps(dict(r["task"]), sort_keys=True): r for r in ctx.forktrees}
        print(json.dumps({"forktrees": counts, "pool_samples": drawn}), file=sys.stderr)
    return ctx


def run_experiment(opts: ExperimentOptions, *, as_json: bool = False) -> int:
    """Run the (arm, seed) pairs not yet in ``results.jsonl``; append each; return 0.

    Raises:
        ValueError: an unknown arm, a Clip-Cov lower bound not below the window's top, or
            ``--frontier`` with no multi-family held-out task.
    """
    import torch

    arms = [parse_arm(a) for a in opts.arms]
    for a in arms:
        lo, hi = cov_knobs(a, opts)[2]
        if a.loss == "clip-cov" and not lo < hi:
            raise ValueError(f"arm {a.name!r}: the lower bound {lo} must be below {hi}")
    torch.set_num_threads(max(1, opts.threads))
    opts.workdir.mkdir(parents=True, exist_ok=True)
    out = opts.workdir / "results.jsonl"
    key = config_key(opts)
    done = done_runs(out, key)
    asked = [(a, s) for s in opts.seeds for a in [None, *arms]]
    todo = [(a, s) for a, s in asked if (a.name if a else "start", s) not in done]
    started = time.perf_counter()
    if todo:
        with LocalCertd(opts.workdir / "certd-data") as certd:
            with CertdClient(certd.address, trusted_keys=[certd.vkey]) as client:
                ctx = _context(
                    client,
                    certd.vkey,
                    opts,
                    any(
                        (a and a.needs_forktrees) or (a and a.replay == "unbalanced")
                        for a, _ in todo
                    ),
                )
                for arm, seed in todo:
                    rec = run_start(ctx, seed) if arm is None else run_one(arm, ctx, seed)
                    _append(out, {**rec, "config": key})
    summary = {
        "results": str(out),
        "config": key,
        "ran": len(todo),
        "skipped": len(asked) - len(todo),  # the asked pairs the file already holds
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(summary) if as_json else "\n".join(f"{k:10} {v}" for k, v in summary.items()))
    return 0
