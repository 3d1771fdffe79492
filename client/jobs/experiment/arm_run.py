"""One (arm, seed) run: optional fork-tree SFT, GRPO steps with the arm's changes, evaluations."""

from __future__ import annotations

import copy
import json
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ...advantages import grpo_advantages, informed_stratified_advantages
from ...client import CertdClient
from ...entry import batch_entry_entropy, entry_kl
from ...metrics import EntropyMonitor
from ...progress import Progress
from ...replay import FamilyReplay, coverage_plan
from ..policy.policy import Policy
from ..policy.train import MAX_GRAD_NORM, batch, example, sft_step, token_logprobs
from ..run import entry_of
from .arms import ArmSpec, cov_knobs
from .entry_credit import entry_credit_loss, fec_advantages
from .evaluate import (
    Feasible,
    evaluate,
    feasible_families,
    intervention,
    legacy_intervention,
    low_reach_pairs,
    task_counts,
)
from .frontier import ALL_TASKS_AT, interpolate, multi_family, save_checkpoint
from .losses import policy_loss, shuffled_rewards
from .options import ExperimentOptions
from .policyops import Batch, family_logprobs, sample_batch, scored_mask
from .seeds import RunSeeds

__all__ = ["Context", "run_one"]


@dataclass
class Context:
    """What every run of one protocol shares."""

    client: CertdClient
    opts: ExperimentOptions
    train: Sequence[Mapping[str, Any]]
    held_out: Sequence[Mapping[str, Any]]
    held_feasible: Sequence[Feasible]
    forktrees: list[dict[str, Any]] = field(default_factory=list)
    pool: list[dict[str, Any]] = field(default_factory=list)
    train_labels: dict[int, list[str]] = field(default_factory=dict)
    by_task: dict[str, dict[str, Any]] = field(default_factory=dict)


def _labels(ctx: Context, i: int) -> list[str]:
    if i not in ctx.train_labels:
        fams = feasible_families(ctx.client, ctx.train[i])
        ctx.train_labels[i] = [label for fam in fams for label in fam]
    return ctx.train_labels[i]


def _advantages(
    arm: ArmSpec, rewards: list[float], b: Batch, families: list[str], seed: int
) -> torch.Tensor:
    if arm.advantage == "shuffled":
        return torch.tensor(grpo_advantages(shuffled_rewards(rewards, seed), b.questions))
    if arm.advantage == "grpo":
        return torch.tensor(grpo_advantages(rewards, b.questions))
    total, _ = informed_stratified_advantages(rewards, b.questions, families, forced=b.forced)
    adv = torch.tensor(total)
    return adv / (adv.std(unbiased=False) + 1e-6)


def _extra_loss(
    arm: ArmSpec,
    ctx: Context,
    policy: Policy,
    ref: Policy,
    replay: FamilyReplay | None,
    chosen: list[int],
    share: int,
) -> torch.Tensor:
    loss = torch.zeros(())
    if replay is not None and arm.replay_weight > 0:
        exs = [example(policy, it.task, it.witness) for it in replay.sample(share)]
        ids, mask = batch(exs, policy.tokenizer.pad)
        lp = token_logprobs(policy, ids)
        loss = loss + arm.replay_weight * (-(lp * mask).sum() / mask.sum())
    if arm.kl_weight > 0:
        kls = []
        for i in chosen:
            labels = _labels(ctx, i)
            if len(labels) > 1:
                with torch.no_grad():
                    ref_lp = family_logprobs(ref, ctx.train[i], labels)
                kls.append(entry_kl(family_logprobs(policy, ctx.train[i], labels), ref_lp))
        if kls:
            loss = loss + arm.kl_weight * torch.stack(kls).mean()
    return loss


@dataclass
class _Run:
    """What one (arm, seed) run carries from step to step."""

    arm: ArmSpec
    ctx: Context
    policy: Policy
    ref: Policy
    opt: Any
    replay: FamilyReplay | None
    seeds: RunSeeds
    rng: random.Random


def _rollouts(run: _Run, step: int) -> tuple[list[int], Batch]:
    """The step's tasks and their free and forced rollouts (the arm's fork coverage)."""
    o, ctx = run.ctx.opts, run.ctx
    chosen = run.rng.sample(range(len(ctx.train)), min(o.prompts_per_step, len(ctx.train)))
    plans = []
    for i in chosen:
        rec = ctx.by_task.get(json.dumps(dict(ctx.train[i]), sort_keys=True))
        plan = coverage_plan(
            rec,
            group_size=o.group_size,
            m=run.arm.coverage_m,
            per_family=o.per_family,
            seed=run.seeds.coverage(step, i),
        )
        plans.append((i, ctx.train[i], plan))
    b = sample_batch(
        run.policy,
        plans,
        group_size=o.group_size,
        max_tokens=o.max_tokens,
        seed=run.seeds.rollouts(step),
        unscored_entry=run.arm.unscored_entry,
    )
    return chosen, b


def _update(
    run: _Run,
    step: int,
    chosen: list[int],
    b: Batch,
    adv: torch.Tensor,
    credit: list[float] | None = None,
) -> None:
    """The step's policy updates: one per minibatch, PPO-style (the later ones off-policy)."""
    o, policy = run.ctx.opts, run.policy
    ids, mask = scored_mask(b, policy.tokenizer.pad)
    policy.model.train()
    with torch.no_grad():
        old_lp = token_logprobs(policy, ids)
    rows = list(range(len(b.examples)))
    run.rng.shuffle(rows)
    mbs = max(1, o.minibatches)
    ratio, coef, bounds = cov_knobs(run.arm, o)
    for k in range(mbs):
        mb = torch.tensor(sorted(rows[k::mbs]))
        lp = token_logprobs(policy, ids[mb])
        loss = policy_loss(
            lp,
            old_lp[mb],
            adv[mb].float(),
            mask[mb],
            kind=run.arm.loss,
            clip=o.clip,
            cov_ratio=ratio,
            kl_coef=coef,
            cov_bounds=bounds,
            seed=run.seeds.token_selection(step, k),
        )
        share = o.replay_n // mbs
        loss = loss + _extra_loss(
            run.arm, run.ctx, policy, run.ref, run.replay, chosen[k::mbs], share
        )
        if credit is not None:
            loss = loss + entry_credit_loss(policy, run.ctx.train, b, credit, mb.tolist())
        run.opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # Tensor.backward is unannotated in torch
        torch.nn.utils.clip_grad_norm_(policy.model.parameters(), MAX_GRAD_NORM)
        run.opt.step()


def _step(run: _Run, step: int) -> tuple[float, float]:
    """One GRPO step: rollouts, verdicts, advantages, updates; (mean reward, entry entropy)."""
    chosen, b = _rollouts(run, step)
    verdicts = run.ctx.client.verify_batch_pb(b.items)
    rewards = [float(v.reward) for v in verdicts]
    families = [entry_of(v) for v in verdicts]
    credit = None
    if run.arm.advantage == "fec":
        adv, credit = fec_advantages(run.policy, run.ctx.train, rewards, b, families)
    else:
        adv = _advantages(run.arm, rewards, b, families, run.seeds.shuffle(step))
    _update(run, step, chosen, b, adv, credit)
    free = [(q, f) for q, f, fo in zip(b.questions, families, b.forced, strict=True) if not fo]
    h = batch_entry_entropy([q for q, _ in free], [f for _, f in free])
    return sum(rewards) / len(rewards), h


def _replay(arm: ArmSpec, ctx: Context, seed: int) -> FamilyReplay | None:
    if arm.replay == "balanced" and ctx.forktrees:
        return FamilyReplay(ctx.forktrees, balanced=True, seed=seed)
    if arm.replay == "unbalanced" and ctx.pool:
        return FamilyReplay(ctx.pool, balanced=False, seed=seed)
    return None


def _sft(ctx: Context, policy: Policy, seed: int) -> float | None:
    if not ctx.forktrees:
        return None
    data = FamilyReplay(ctx.forktrees, balanced=True, seed=seed)
    opt = torch.optim.AdamW(policy.model.parameters(), lr=ctx.opts.sft_lr, weight_decay=0.0)
    losses = [
        sft_step(policy, [example(policy, it.task, it.witness) for it in data.sample(32)], opt)
        for _ in range(ctx.opts.sft_steps)
    ]
    return round(sum(losses[-10:]) / len(losses[-10:]), 4) if losses else None


def _eval(
    ctx: Context, policy: Policy, seeds: RunSeeds, *, multi: bool = False
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """The held-out evaluation; ``multi``: on the multi-family tasks only (frontier runs)."""
    o = ctx.opts
    keep = multi_family(ctx.held_feasible) if multi else range(len(ctx.held_out))
    return evaluate(
        ctx.client,
        policy,
        [ctx.held_out[i] for i in keep],
        [ctx.held_feasible[i] for i in keep],
        n=o.eval_n,
        max_tokens=o.max_tokens,
        seed=seeds.evaluation,
    )


def _frontier_points(run: _Run, seed: int, step: int) -> list[dict[str, Any]]:
    """GRPO's checkpoint at ``step`` kept, and its interpolations toward the start evaluated."""
    o = run.ctx.opts
    if not o.frontier or run.arm.name != "grpo":
        return []
    save_checkpoint(run.policy, o.workdir, seed, step)
    out = []
    for a in o.interp_alphas:
        mixed = interpolate(run.ref, run.policy, a)
        point, _ = _eval(run.ctx, mixed, run.seeds, multi=True)
        out.append({"step": step, "alpha": a, **point})
    return out


def _intervene(
    ctx: Context,
    policy: Policy,
    rows: list[dict[str, Any]],
    seeds: RunSeeds,
    start: Policy | None = None,
) -> dict[str, Any]:
    """The intervention on ``policy``'s low-reach pairs; with ``start``, also under it.

    Returns ``{"intervention": …}`` and, with ``start`` and ``free_n > 0``,
    ``"intervention_start"``: the same pairs and seeds under the starting policy.
    """
    o = ctx.opts
    if not o.free_n:
        return {
            "intervention": legacy_intervention(
                ctx.client, policy, ctx.held_out, ctx.held_feasible, rows,
                low_reach=o.low_reach, forced_n=o.forced_n, max_pairs=o.max_pairs,
                max_tokens=o.max_tokens, seed=seeds.intervention,
            )
        }  # fmt: skip
    pairs = low_reach_pairs(ctx.held_feasible, rows, low_reach=o.low_reach, max_pairs=o.max_pairs)
    out: dict[str, Any] = {}
    for key, pol in (("intervention", policy), ("intervention_start", start)):
        if pol is not None:
            out[key] = intervention(
                ctx.client, pol, ctx.held_out, pairs, free_n=o.free_n, forced_n=o.forced_n,
                max_tokens=o.max_tokens, seed=seeds.intervention,
            )  # fmt: skip
    return out


def run_start(ctx: Context, seed: int) -> dict[str, Any]:
    """The starting policy's evaluation and intervention for one seed (arm ``start``)."""
    started = time.perf_counter()
    seeds = RunSeeds(seed)
    policy = Policy.load(None)
    point, rows = _eval(ctx, policy, seeds)
    return {
        "arm": "start",
        "seed": seed,
        "end": point,
        "end_tasks": task_counts(rows),
        **_intervene(ctx, policy, rows, seeds),
        "seconds": round(time.perf_counter() - started, 1),
    }


def _start_run(arm: ArmSpec, ctx: Context, seeds: RunSeeds, rec: dict[str, Any]) -> _Run:
    """The run's policy (after the arm's SFT, recorded in ``rec``), reference and optimiser."""
    if (arm.needs_forktrees and not ctx.forktrees) or (arm.replay == "unbalanced" and not ctx.pool):
        raise ValueError(f"arm {arm.name} needs certified fork trees / a replay pool; none")
    torch.manual_seed(seeds.torch)
    policy = Policy.load(None)
    ref = copy.deepcopy(policy)
    ref.model.eval()
    if arm.sft:
        rec["sft_loss"] = _sft(ctx, policy, seeds.replay)
        rec["after_sft"], _ = _eval(ctx, policy, seeds)
    replay = _replay(arm, ctx, seeds.replay)
    opt = torch.optim.AdamW(policy.model.parameters(), lr=ctx.opts.lr, weight_decay=0.0)
    return _Run(arm, ctx, policy, ref, opt, replay, seeds, random.Random(seeds.steps))


def run_one(arm: ArmSpec, ctx: Context, seed: int) -> dict[str, Any]:
    """Train one arm from the shipped weights with one seed; its record for the JSONL."""
    o = ctx.opts
    started = time.perf_counter()
    rec: dict[str, Any] = {"arm": arm.name, "seed": seed}
    if arm.loss != "pg":
        ratio, coef, (lb, _) = cov_knobs(arm, o)
        rec.update(cov_ratio=ratio, kl_cov_coef=coef, clip_cov_lb=lb)
    run = _start_run(arm, ctx, RunSeeds(seed), rec)
    monitor = EntropyMonitor(max_drop=0.5, cooldown_steps=20)
    curve, entropies, rewards, interp = [], [], [], []
    with Progress(f"{arm.name} seed {seed}", unit="steps", total=o.steps) as progress:
        for step in range(1, o.steps + 1):
            reward, h = _step(run, step)
            rewards.append(reward)
            entropies.append(round(h, 4))
            monitor.observe(step, h)
            if o.eval_every and step % o.eval_every == 0 and step != o.steps:
                multi = o.frontier and step not in ALL_TASKS_AT
                point, _ = _eval(ctx, run.policy, run.seeds, multi=multi)
                curve.append({"step": step, **point})
                interp += _frontier_points(run, seed, step)
            progress.set_postfix(reward=round(reward, 3), entropy=round(h, 3))
            progress.update(1)
    point, rows = _eval(ctx, run.policy, run.seeds)
    interp += _frontier_points(run, seed, o.steps)
    if o.frontier:
        rec.update(interp=interp, steps=o.steps)
    rec.update(
        end=point,
        end_tasks=task_counts(rows),
        curve=curve,
        **_intervene(ctx, run.policy, rows, run.seeds, start=run.ref),
        train_reward_last10=round(sum(rewards[-10:]) / max(1, len(rewards[-10:])), 4),
        batch_entry_entropy=entropies[:: max(1, len(entropies) // 20)],
        monitor_alarms=[{"step": a.step, "entropy": round(a.entropy, 4)} for a in monitor.alarms],
        seconds=round(time.perf_counter() - started, 1),
    )
    print(
        json.dumps({"arm": arm.name, "seed": seed, **point, "seconds": rec["seconds"]}),
        file=sys.stderr,
        flush=True,
    )
    return rec
