"""The mechanism experiment: GRPO on the embedded policy in three arms, on CPU.

Example::

    forkgate experiment countdown                       # defaults: well under 30 min, 2 cores
    forkgate experiment countdown --steps 200 --tasks 512 --group-size 32   # scaled up

Arms, from the same starting weights, with the same seeds, tasks and rollout budget:

* ``grpo`` — standard GRPO: advantages normalised within each question's group,
  ``A_i = (r_i - mean_q) / (std_q + eps)``.
* ``stratified`` — stratified GRPO: groups keyed by (question, κ entry family) with the
  per-family prior (``StratifiedAdvantages``, leave-one-out baseline shrunk toward the
  family's smoothed success rate), then scaled to unit standard deviation over the batch so
  the step size matches the standard arm's.
* ``sft+stratified`` — fork-tree SFT first (the base policy's certified fork trees over the
  training tasks, with forced entries for uncovered families, admitted by the ratchet; one
  witness per family, so every certified family gets equal weight), then stratified GRPO.

Each step samples ``group_size`` rollouts for ``prompts_per_step`` training tasks, verifies
them through certd (the entry family is the one the reasoning initiated, else the answer's),
and takes one on-policy policy-gradient step, ``loss = -mean_i A_i * mean_t log p(y_t)``.
Every ``eval_every`` steps the held-out tasks are sampled ``eval_n`` times: pass@1, pass@16,
EC@16, entry entropy and first-token entropy (exact: the policy reports its whole first-token
distribution). After training, the *entry-prefix intervention*: on the held-out tasks, the
feasible families the policy enters in less than ``low_reach`` of its samples are forced
(``<think>{operand}{operator}``) and their completion rate compared with the free rate.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from certd.v1 import tasks_pb2

from .client import CertdClient
from .local import LocalCertd
from .puzzles import small_countdown_puzzles
from .run import _entry, evaluate_tasks

__all__ = ["ARMS", "ExperimentOptions", "run_experiment"]

ARMS = ("grpo", "stratified", "sft+stratified")
KAPPA = "countdown.first-op.v1"


@dataclass
class ExperimentOptions:
    """The experiment's size and settings (defaults: ~10–20 minutes on 2 shared cores).

    Attributes:
        workdir: outputs (emptied first): ``experiment.json``, ``report/``, fork trees.
        steps: GRPO steps per arm.
        tasks: training tasks (drawn with ``seed``).
        prompts_per_step: tasks per GRPO step.
        group_size: rollouts per task per step.
        eval_tasks: held-out tasks (drawn with ``seed + 1``).
        eval_every: steps between evaluations (step 0 and the last step always).
        eval_n: samples per held-out task (pass@16 and EC@16 need 16).
        lr: the GRPO learning rate (AdamW).
        seed: tasks, sampling and update order; the same in every arm.
        sft_steps: fork-tree SFT steps of the third arm.
        sft_batch: fork-tree SFT batch size.
        sft_lr: fork-tree SFT learning rate.
        forktree_budget: samples per training task when building the fork trees.
        low_reach: families entered in fewer than this share of samples are "low reach".
        forced_n: samples per forced (task, family) in the intervention.
        max_forced: (task, family) pairs forced at most per arm.
        arms: which arms to run.
        threads: torch CPU threads.
        weights: starting weights ("" for the shipped policy).
        max_tokens: generation length.
    """

    workdir: Path = Path("out/experiment")
    steps: int = 100
    tasks: int = 64
    prompts_per_step: int = 8
    group_size: int = 16
    eval_tasks: int = 32
    eval_every: int = 20
    eval_n: int = 16
    lr: float = 2e-4
    seed: int = 0
    sft_steps: int = 60
    sft_batch: int = 32
    sft_lr: float = 3e-4
    forktree_budget: int = 32
    low_reach: float = 0.1
    forced_n: int = 8
    max_forced: int = 48
    arms: tuple[str, ...] = ARMS
    threads: int = 1
    weights: str = ""
    max_tokens: int = 80


def _grpo_advantages(rewards: Sequence[float], questions: Sequence[str]) -> list[float]:
    """Standard GRPO: (r - mean) / (std + eps) within each question's group."""
    groups: dict[str, list[float]] = {}
    for q, r in zip(questions, rewards, strict=True):
        groups.setdefault(q, []).append(r)
    stats = {}
    for q, rs in groups.items():
        mean = sum(rs) / len(rs)
        std = (sum((r - mean) ** 2 for r in rs) / len(rs)) ** 0.5
        stats[q] = (mean, std)
    return [
        (r - stats[q][0]) / (stats[q][1] + 1e-6) for q, r in zip(questions, rewards, strict=True)
    ]


def _evaluate(
    client: CertdClient, sampler: Any, tasks: Sequence[Mapping[str, Any]], opts: ExperimentOptions
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    rows = evaluate_tasks(
        client,
        sampler,
        tasks,
        k=opts.eval_n,
        max_tokens=opts.max_tokens,
        seed=opts.seed + 104729,
        progress=True,
    )
    n = len(rows)
    k = str(min(16, opts.eval_n))
    fte = [r["first_token_entropy"] for r in rows if r["first_token_entropy"] is not None]
    point = {
        "pass@1": sum(r["correct"] / r["samples"] for r in rows) / n,
        "pass@16": sum(r["pass_at_k"].get(k, 0.0) for r in rows) / n,
        "EC@16": sum(r["ec_at_k"] for r in rows) / n,
        "entry_entropy": sum(r["entry_entropy"] for r in rows) / n,
        "first_token_entropy": sum(fte) / len(fte) if fte else 0.0,
    }
    return {k2: round(v, 4) for k2, v in point.items()}, rows


def _intervention(
    client: CertdClient,
    policy: Any,
    tasks: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    opts: ExperimentOptions,
) -> dict[str, Any]:
    """Completion of low-reach families, free (as entered) against forced (prefix)."""
    from .forktree import countdown_prompt

    free_ok = free_n = forced_ok = forced_n = pairs = 0
    for i, (task, row) in enumerate(zip(tasks, rows, strict=True)):
        enum = client.enumerate_families(task)
        total = max(1, row["samples"])
        for lw in enum.labels:
            label = lw.label.value
            fam = row["family_completion"].get(label, {"correct": 0, "total": 0})
            if fam["total"] / total >= opts.low_reach or pairs >= opts.max_forced:
                continue
            pairs += 1
            free_ok += fam["correct"]
            free_n += fam["total"]
            prefix = f"<think>{lw.label.fields['operand']}{lw.label.fields['operator']}"
            [group] = policy.sample(
                [countdown_prompt(task)],
                n=opts.forced_n,
                max_tokens=opts.max_tokens,
                seed=opts.seed + 31 * i + pairs,
                prefix=prefix,
            )
            verdicts = client.verify_batch([(task, s.text) for s in group])
            forced_n += len(verdicts)
            forced_ok += sum(
                v.status == tasks_pb2.CORRECT and v.family.value == label for v in verdicts
            )
    return {
        "pairs": pairs,
        "free": round(free_ok / free_n, 4) if free_n else 0.0,
        "free_samples": free_n,
        "forced": round(forced_ok / forced_n, 4) if forced_n else 0.0,
        "forced_samples": forced_n,
    }


def _forktree_sft(
    client: CertdClient,
    policy: Any,
    tasks: Sequence[Mapping[str, Any]],
    opts: ExperimentOptions,
    vkey: str,
) -> dict[str, Any]:
    """Build fork trees with the policy, admit them through the ratchet, SFT on the witnesses."""
    import torch

    from .forktree import ForkTreeBuilder
    from .policy.train import example, sft_step
    from .ratchet import Ratchet
    from .samplers import EmbeddedSampler

    out = opts.workdir / "forktrees.jsonl"
    builder = ForkTreeBuilder(
        client,
        EmbeddedSampler(policy=policy),
        m=4,
        budget=opts.forktree_budget,
        round_size=16,
        max_tokens=opts.max_tokens,
        force_prefix=True,
        prefix_template="<think>{operand}{operator}",
        seed=opts.seed,
    )
    records = builder.run(tasks, out)
    ratchet = Ratchet(
        [vkey], kappas={KAPPA}, consistency=lambda a, b: client.consistency_proof(a, b).hashes
    )
    examples = []
    admitted = 0
    for rec in records:
        if rec["families"] and ratchet.admit(rec).admitted:
            admitted += 1
            for fam in rec["families"]:
                try:
                    examples.append(example(policy, rec["task"], fam["witness"]))
                except ValueError:
                    continue  # a witness the format cannot write (certd accepted it anyway)
    rng = random.Random(opts.seed)
    opt = torch.optim.AdamW(policy.model.parameters(), lr=opts.sft_lr, weight_decay=0.0)
    losses = []
    for _ in tqdm(range(opts.sft_steps if examples else 0), desc="fork-tree SFT", disable=None):
        losses.append(
            sft_step(policy, rng.sample(examples, min(opts.sft_batch, len(examples))), opt)
        )
    return {
        "records": len(records),
        "admitted": admitted,
        "families": len(examples),
        "forced_families": sum(bool(f.get("forced")) for r in records for f in r["families"]),
        "final_loss": round(sum(losses[-10:]) / len(losses[-10:]), 4) if losses else None,
    }


def _run_arm(
    arm: str,
    client: CertdClient,
    vkey: str,
    train: Sequence[Mapping[str, Any]],
    held_out: Sequence[Mapping[str, Any]],
    opts: ExperimentOptions,
) -> dict[str, Any]:
    import torch

    from .advantages import StratifiedAdvantages
    from .forktree import countdown_prompt
    from .policy.policy import Policy
    from .policy.train import batch, token_logprobs
    from .samplers import EmbeddedSampler

    torch.manual_seed(opts.seed)
    policy = Policy.load(Path(opts.weights) if opts.weights else None)
    sampler = EmbeddedSampler(policy=policy, top_k_logprobs=policy.tokenizer.vocab_size)
    info: dict[str, Any] = {}
    if arm == "sft+stratified":
        info["sft"] = _forktree_sft(client, policy, train, opts, vkey)
    stratified = StratifiedAdvantages(scale="batch") if arm != "grpo" else None
    opt = torch.optim.AdamW(policy.model.parameters(), lr=opts.lr, weight_decay=0.0)
    rng = random.Random(opts.seed)
    curve = []
    point, rows = _evaluate(client, sampler, held_out, opts)
    curve.append({"step": 0, **point})
    bar = tqdm(range(1, opts.steps + 1), desc=f"GRPO {arm}", unit="step", disable=None)
    for step in bar:
        chosen = rng.sample(range(len(train)), min(opts.prompts_per_step, len(train)))
        prompts = [countdown_prompt(train[i]) for i in chosen]
        groups = sampler.sample(
            prompts, n=opts.group_size, max_tokens=opts.max_tokens, seed=opts.seed + 1000 * step
        )
        items, questions, families, rewards, examples = [], [], [], [], []
        for i, group in zip(chosen, groups, strict=True):
            prompt_ids = policy.prompt_ids(countdown_prompt(train[i]))
            for s in group:
                items.append((train[i], s.text))
                questions.append(str(i))
                # The response ids after the prompt: the forced <think> and what was generated.
                response = policy.tokenizer.encode("<think>") + list(s.token_ids)
                ended = s.finish_reason == "stop"
                examples.append((prompt_ids, response + ([policy.tokenizer.eos] if ended else [])))
        verdicts = client.verify_batch(items)
        for v in verdicts:
            rewards.append(float(v.reward))
            families.append(_entry(v))
        if stratified is None:
            adv = torch.tensor(_grpo_advantages(rewards, questions))
        else:
            adv = stratified(torch.tensor(rewards), questions, families).float()
        policy.model.train()
        ids, mask = batch(examples, policy.tokenizer.pad)
        # Score only the generated tokens: the forced <think> is not the policy's choice.
        for row, (p, _r) in enumerate(examples):
            mask[row, len(p) - 1] = False
        lp = token_logprobs(policy, ids)
        per_seq = (lp * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        loss = -(adv * per_seq).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # Tensor.backward is unannotated in torch
        torch.nn.utils.clip_grad_norm_(policy.model.parameters(), 1.0)
        opt.step()
        bar.set_postfix(reward=round(sum(rewards) / len(rewards), 3))
        if step % opts.eval_every == 0 or step == opts.steps:
            point, rows = _evaluate(client, sampler, held_out, opts)
            curve.append(
                {"step": step, "train_reward": round(sum(rewards) / len(rewards), 4), **point}
            )
    info["intervention"] = _intervention(client, policy, held_out, rows, opts)
    return {"curve": curve, **info}


def run_experiment(opts: ExperimentOptions, *, as_json: bool = False) -> int:
    """Run the arms; write ``experiment.json`` and the report; print a summary; return 0."""
    import torch

    from .report import write_report
    from .samplers import EmbeddedSampler

    torch.set_num_threads(max(1, opts.threads))
    started = time.perf_counter()
    if opts.workdir.exists():
        shutil.rmtree(opts.workdir)
    opts.workdir.mkdir(parents=True)
    train = small_countdown_puzzles(opts.tasks, seed=opts.seed + 5000)
    held_out = small_countdown_puzzles(opts.eval_tasks, seed=opts.seed + 6000)
    results: dict[str, Any] = {}
    with LocalCertd(opts.workdir / "certd-data") as certd:
        with CertdClient(certd.address, trusted_keys=[certd.vkey]) as client:
            base = EmbeddedSampler(opts.weights or None, top_k_logprobs=64)
            base_rows = evaluate_tasks(
                client,
                base,
                held_out,
                k=opts.eval_n,
                max_tokens=opts.max_tokens,
                seed=opts.seed + 104729,
            )
            for arm in opts.arms:
                results[arm] = _run_arm(arm, client, certd.vkey, train, held_out, opts)
    seconds = round(time.perf_counter() - started, 1)
    doc = {
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(opts).items()},
        "arms": results,
        "seconds": seconds,
    }
    (opts.workdir / "experiment.json").write_text(json.dumps(doc, indent=1) + "\n")
    summary = _summary(results, seconds)
    data = {
        "summary": summary,
        "k": opts.eval_n,
        "tasks": [{**r, "certified": 0} for r in base_rows],
        "pass_at_k": {
            k: sum(r["pass_at_k"][k] for r in base_rows) / len(base_rows)
            for k in base_rows[0]["pass_at_k"]
        },
        "experiment": {
            "arms": {arm: res["curve"] for arm, res in results.items()},
            "intervention": {arm: res["intervention"] for arm, res in results.items()},
        },
        "notes": [
            "The task plots show the starting policy on the held-out tasks (no fork trees are "
            "certified in the experiment's evaluation, so 'certified' reads 0); the experiment "
            "plots show each arm's curves and the entry-prefix intervention."
        ],
    }
    index = write_report(opts.workdir / "report", data)
    summary["report"] = str(index)
    print(json.dumps(summary) if as_json else _screen(summary))
    return 0


def _summary(results: Mapping[str, Any], seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"seconds": seconds}
    for arm, res in results.items():
        first, last = res["curve"][0], res["curve"][-1]
        out[arm] = {
            m: f"{first[m]:.3f} -> {last[m]:.3f}"
            for m in ("pass@1", "pass@16", "EC@16", "entry_entropy", "first_token_entropy")
        } | {
            "intervention": f"free {res['intervention']['free']:.3f}, forced "
            f"{res['intervention']['forced']:.3f} over {res['intervention']['pairs']} families"
        }
    return out


def _screen(s: Mapping[str, Any]) -> str:
    lines = [f"ForkGate experiment countdown ({s['seconds']} s)"]
    for arm, figs in s.items():
        if isinstance(figs, dict):
            lines.append(f"  {arm}")
            lines.extend(f"    {k:20} {v}" for k, v in figs.items())
    lines.append(f"  report {s['report']}")
    return "\n".join(lines)
