"""Train the embedded Countdown policy from certd's enumerated solutions (CPU, ~12 minutes).

Example::

    .venv/bin/python scripts/train_policy.py                  # writes the shipped weights
    .venv/bin/python scripts/train_policy.py --steps 50 --puzzles 500 --out /tmp/p.safetensors

1. Generate puzzles (3–4 numbers from 1..12, targets 1..100) with the data seed.
2. Enumerate each puzzle's feasible first-op labels and entry families with
   ``certd.domains.countdown.enumerate_families`` (offline, the same code certd serves).
3. Keep, per family, one witness whose reasoning's first step starts with its entry (so the
   first characters of a response commit to a family) and whose steps stay positive integers;
   write each as ``<think>steps</think><answer>expr</answer>``: several families per puzzle.
4. Train the transformer on them (AdamW, cosine schedule, fixed steps and seed).
5. Evaluate on held-out puzzles through certd's verifier; write the weights and a JSON with
   the architecture, the training configuration, the data seed and the evaluation.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from certd.domains.countdown import CountdownTask, enumerate_families, verify_countdown
from forkgate.jobs.policy.format import compact_prompt, first_step_label, parse
from forkgate.jobs.policy.model import PolicyConfig
from forkgate.jobs.policy.policy import DEFAULT_WEIGHTS, Policy
from forkgate.jobs.policy.train import Example, example, sft_step
from forkgate.puzzles import small_countdown_puzzles


def _clean(expr: str) -> bool:
    """Every intermediate value is a positive integer."""
    stack = [parse(expr)]
    while stack:
        node = stack.pop()
        if node.value <= 0 or node.value.denominator != 1:
            return False
        stack.extend(c for c in (node.left, node.right) if c is not None)
    return True


def family_witnesses(task: dict[str, Any]) -> list[str]:
    """One trainable witness per entry family of a task (see the module docstring)."""
    enum = enumerate_families(CountdownTask(numbers=tuple(task["numbers"]), target=task["target"]))
    out = []
    for fam in enum.families:
        for i in fam:
            lw = enum.labels[i]
            if lw.operator and first_step_label(lw.witness) == lw.label and _clean(lw.witness):
                out.append(lw.witness)
                break
    return out


def build_examples(
    policy: Policy, puzzles: Sequence[dict[str, Any]], per_puzzle: int, rng: random.Random
) -> tuple[list[Example], dict[str, float]]:
    """Training examples (several families per puzzle) and figures about them."""
    examples: list[Example] = []
    covered = 0
    fams = []
    for task in puzzles:
        ws = family_witnesses(task)
        rng.shuffle(ws)
        fams.append(len(ws))
        covered += bool(ws)
        examples.extend(example(policy, task, w) for w in ws[:per_puzzle])
    stats = {
        "puzzles": len(puzzles),
        "puzzles_with_examples": covered,
        "examples": len(examples),
        "mean_trainable_families": round(sum(fams) / max(1, len(fams)), 3),
    }
    return examples, stats


def evaluate(
    policy: Policy, puzzles: Sequence[dict[str, Any]], n: int, seed: int
) -> dict[str, Any]:
    """pass@1 (mean over samples), pass@n and distinct correct families, through the verifier."""
    correct = solved = 0
    families: list[int] = []
    for k, task in enumerate(puzzles):
        [group] = policy.sample([compact_prompt(task)], n=n, max_tokens=80, seed=seed + k)
        ct = CountdownTask(numbers=tuple(task["numbers"]), target=task["target"])
        labels = set()
        hits = 0
        for s in group:
            v = verify_countdown(ct, s.text)
            if v.status.name == "CORRECT" and v.family is not None:
                hits += 1
                labels.add(v.family.label)
        correct += hits
        solved += hits > 0
        families.append(len(labels))
    return {
        "puzzles": len(puzzles),
        "samples_per_puzzle": n,
        "pass@1": round(correct / (n * len(puzzles)), 4),
        f"pass@{n}": round(solved / len(puzzles), 4),
        "mean_correct_families": round(sum(families) / len(puzzles), 3),
        "share_with_2plus_families": round(sum(f >= 2 for f in families) / len(puzzles), 4),
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-seed", type=int, default=20261202)
    p.add_argument("--seed", type=int, default=0, help="initialisation and batch order")
    p.add_argument("--puzzles", type=int, default=25000)
    p.add_argument("--per-puzzle", type=int, default=4, help="families kept per puzzle at most")
    p.add_argument("--steps", type=int, default=2400)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--d-model", type=int, default=96)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--eval-puzzles", type=int, default=200)
    p.add_argument("--eval-n", type=int, default=16)
    p.add_argument("--out", type=Path, default=DEFAULT_WEIGHTS)
    return p


def _train(
    policy: Policy,
    examples: list[Example],
    args: argparse.Namespace,
    rng: random.Random,
    started: float,
) -> list[float]:
    """SFT with AdamW, linear warm-up then cosine decay to 10%; returns the per-step losses."""
    opt = torch.optim.AdamW(
        policy.model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98)
    )
    warmup = max(1, args.steps // 50)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            min(1.0, (s + 1) / warmup)
            * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
        ),
    )
    order: list[int] = []
    losses: list[float] = []
    for step in range(args.steps):
        if len(order) < args.batch_size:
            fresh = list(range(len(examples)))
            rng.shuffle(fresh)
            order.extend(fresh)
        idx, order = order[: args.batch_size], order[args.batch_size :]
        losses.append(sft_step(policy, [examples[i] for i in idx], opt))
        sched.step()
        if step % 100 == 0 or step == args.steps - 1:
            recent = sum(losses[-100:]) / len(losses[-100:])
            print(f"step {step} loss {recent:.4f} {time.time() - started:.0f}s", flush=True)
    return losses


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.time()
    rng = random.Random(args.seed)
    cfg = PolicyConfig(
        vocab_size=Policy.new().tokenizer.vocab_size,
        d_model=args.d_model,
        n_layer=args.layers,
        n_head=args.heads,
    )
    policy = Policy.new(cfg, seed=args.seed)
    puzzles = small_countdown_puzzles(args.puzzles, seed=args.data_seed)
    examples, data_stats = build_examples(policy, puzzles, args.per_puzzle, rng)
    print(json.dumps({"data": data_stats, "params": policy.model.num_params()}), flush=True)
    losses = _train(policy, examples, args, rng, started)
    train_s = time.time() - started
    held_out = small_countdown_puzzles(args.eval_puzzles, seed=args.data_seed + 1)
    policy.model.eval()
    ev = evaluate(policy, held_out, args.eval_n, seed=args.seed)
    meta = {
        "name": "countdown-tiny",
        "data_seed": args.data_seed,
        "eval_data_seed": args.data_seed + 1,
        "puzzle_distribution": {"sizes": [3, 4], "max_number": 12, "target_range": [1, 100]},
        "training": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "data": data_stats,
        "params": policy.model.num_params(),
        "final_loss": round(sum(losses[-100:]) / len(losses[-100:]), 4),
        "train_seconds": round(train_s, 1),
        "eval": ev,
        "command": "python scripts/train_policy.py",
    }
    meta["training"].pop("out", None)
    policy.save(args.out, meta)
    print(
        json.dumps({"eval": ev, "seconds": round(time.time() - started, 1), "out": str(args.out)})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
