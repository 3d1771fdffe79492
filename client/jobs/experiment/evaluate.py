"""Held-out evaluation: sampled coverage, exact entry metrics, the entry-prefix intervention."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from certd.v1 import tasks_pb2

from ...client import CertdClient
from ...coverage_metrics import ec_of_rows, solution_coverage_of_rows
from ...entry import feasible_entropy, feasible_mass, reach_at_k
from ...forktree import countdown_prompt
from ..embedded import EmbeddedSampler
from ..policy.format import THINK
from ..policy.policy import Policy
from ..run import entry_of, evaluate_tasks
from .policyops import entry_prefix, family_logprobs
from .seeds import forced_pair_seed, free_task_seed

__all__ = [
    "Feasible",
    "Pair",
    "evaluate",
    "exact_family_probs",
    "feasible_families",
    "intervention",
    "legacy_intervention",
    "low_reach_pairs",
    "task_counts",
]

Feasible = list[list[str]]  # per feasible family, its κ labels


def feasible_families(client: CertdClient, task: Mapping[str, Any]) -> Feasible:
    """The task's feasible families, each as the list of its κ labels (certd's enumerator)."""
    enum = client.enumerate_families(task)
    return [[enum.labels[i].label.value for i in fam.label_indexes] for fam in enum.families]


def exact_family_probs(policy: Policy, task: Mapping[str, Any], feasible: Feasible) -> list[float]:
    """π_f per feasible family: the sum of its labels' teacher-forced prefix probabilities."""
    labels = [label for fam in feasible for label in fam]
    if not labels:
        return []
    with torch.no_grad():
        p = family_logprobs(policy, task, labels).exp().tolist()
    out, i = [], 0
    for fam in feasible:
        out.append(min(1.0, sum(p[i : i + len(fam)])))
        i += len(fam)
    return out


def evaluate(
    client: CertdClient,
    policy: Policy,
    tasks: Sequence[Mapping[str, Any]],
    feasible: Sequence[Feasible],
    *,
    n: int,
    max_tokens: int,
    seed: int,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Sampled and exact metrics, means over the held-out tasks.

    ``EC@16`` is the unbiased estimator over the ``n`` draws (``forkgate.coverage_metrics``),
    with ``EC@16 multi`` over the multi-family tasks beside it (None when there are none).
    """
    sampler = EmbeddedSampler(policy=policy, top_k_logprobs=policy.tokenizer.vocab_size)
    k = str(min(16, n))
    rows = evaluate_tasks(
        client, sampler, tasks, k=n, max_tokens=max_tokens, seed=seed, progress=False,
        ec_k=int(k),
    )  # fmt: skip
    reach, ent, mass = [], [], []
    for task, fams, row in zip(tasks, feasible, rows, strict=True):
        probs = exact_family_probs(policy, task, fams)
        row["exact_pi"] = probs
        if probs:
            reach.append(reach_at_k(probs, 16))
            ent.append(feasible_entropy(probs))
            mass.append(feasible_mass(probs))
    m = len(rows)
    point = {
        "pass@1": sum(r["correct"] / r["samples"] for r in rows) / m,
        "pass@16": sum(r["pass_at_k"].get(k, 0.0) for r in rows) / m,
        # "EC@16" whatever n (below 16 draws it is EC@n, as the records always had it)
        **{key.replace(f"EC@{k}", "EC@16"): v for key, v in ec_of_rows(rows, int(k)).items()},
        "solution_coverage": solution_coverage_of_rows(rows)["solution_coverage"],
        "pass@1 multi": _mean([r["correct"] / r["samples"] for r in rows if r["feasible"] >= 2]),
        "entry_entropy": sum(r["entry_entropy"] for r in rows) / m,
        "reach@16": sum(reach) / max(1, len(reach)),
        "feasible_entropy": sum(ent) / max(1, len(ent)),
        "feasible_mass": sum(mass) / max(1, len(mass)),
    }
    point = {k: v if v is None or k == "multi_tasks" else round(v, 4) for k, v in point.items()}
    return point, rows


def task_counts(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per task, what recomputes EC@K for any K <= n offline (``coverage_metrics.ec_of_rows``)
    and solution coverage (``solution_coverage_of_rows``)."""
    return [
        {
            "samples": r["samples"],
            "feasible": r["feasible"],
            "family_correct": r["family_correct"],
            "solution_counts": r.get("solution_counts"),
        }
        for r in rows
    ]


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


Pair = tuple[int, list[str]]  # (held-out task index, a feasible family's κ labels)


def low_reach_pairs(
    feasible: Sequence[Feasible],
    rows: Sequence[Mapping[str, Any]],
    *,
    low_reach: float,
    max_pairs: int,
) -> list[Pair]:
    """(task, family) pairs whose exact π_f (``rows[i]["exact_pi"]``) is below ``low_reach``."""
    pairs: list[Pair] = []
    for i, (fams, row) in enumerate(zip(feasible, rows, strict=True)):
        for fam, pi in zip(fams, row["exact_pi"], strict=True):
            if pi < low_reach and len(pairs) < max_pairs:
                pairs.append((i, fam))
    return pairs


def _free_counts(
    client: CertdClient,
    policy: Policy,
    task: Mapping[str, Any],
    fams: Sequence[list[str]],
    *,
    n: int,
    max_tokens: int,
    seed: int,
) -> list[tuple[int, int]]:
    """(entries in the family, correct among them) per family, from ``n`` free samples."""
    [group] = policy.sample([countdown_prompt(task)], n=n, max_tokens=max_tokens, seed=seed)
    verdicts = client.verify_batch_pb([(task, s.text) for s in group])
    out = []
    for fam in fams:
        hit = [v for v in verdicts if entry_of(v) in fam]
        out.append((len(hit), sum(v.status == tasks_pb2.CORRECT for v in hit)))
    return out


def _forced_correct(
    client: CertdClient,
    policy: Policy,
    task: Mapping[str, Any],
    fam: list[str],
    *,
    n: int,
    max_tokens: int,
    seed: int,
) -> int:
    """Correct answers in the family among ``n`` samples forced to open with its first label."""
    [group] = policy.sample(
        [countdown_prompt(task)], n=n, max_tokens=max_tokens, seed=seed,
        prefix=THINK + entry_prefix(fam[0]),
    )  # fmt: skip
    verdicts = client.verify_batch_pb([(task, s.text) for s in group])
    return sum(v.status == tasks_pb2.CORRECT and v.family.value in fam for v in verdicts)


def intervention(
    client: CertdClient,
    policy: Policy,
    tasks: Sequence[Mapping[str, Any]],
    pairs: Sequence[Pair],
    *,
    free_n: int,
    forced_n: int,
    max_tokens: int,
    seed: int,
) -> dict[str, Any]:
    """Free against forced completion of the ``pairs`` under ``policy`` (see the report).

    Per pair: π_f exact (teacher-forced, this policy); ``free_n`` free samples of the pair's
    task (shared by the task's pairs, one batch per task, seed ``free_task_seed``) give the
    family's hits and correct hits; ``forced_n`` samples forced to open with the family's
    first label (seed ``forced_pair_seed``) give the forced completion. ``free`` is correct
    hits / hits (sampled both ways); ``free_exact_pi`` is (correct hits / ``free_n``) / π_f
    pooled over pairs, the sampled joint rate over the exact family probability.
    """
    by_task: dict[int, list[list[str]]] = {}
    for i, fam in pairs:
        by_task.setdefault(i, []).append(fam)
    pi_sum = joint = 0.0
    hits = free_ok = forced_ok = 0
    count = 0
    for i, fams in by_task.items():
        pis = exact_family_probs(policy, tasks[i], fams)
        free = _free_counts(
            client, policy, tasks[i], fams, n=free_n, max_tokens=max_tokens,
            seed=free_task_seed(seed, i),
        )  # fmt: skip
        for fam, pi, (h, ok) in zip(fams, pis, free, strict=True):
            count += 1
            pi_sum, joint, hits, free_ok = pi_sum + pi, joint + ok / free_n, hits + h, free_ok + ok
            forced_ok += _forced_correct(
                client, policy, tasks[i], fam, n=forced_n, max_tokens=max_tokens,
                seed=forced_pair_seed(seed, i, count),
            )  # fmt: skip
    return {
        "pairs": count,
        "mean_pi": round(pi_sum / count, 5) if count else 0.0,
        "free": round(free_ok / hits, 4) if hits else None,
        "free_hits": hits,
        "free_samples": free_n * count,
        "free_exact_pi": round(joint / pi_sum, 4) if pi_sum > 0 else None,
        "forced": round(forced_ok / (forced_n * count), 4) if count and forced_n else None,
        "forced_samples": forced_n * count,
    }


def legacy_intervention(
    client: CertdClient,
    policy: Policy,
    tasks: Sequence[Mapping[str, Any]],
    feasible: Sequence[Feasible],
    rows: Sequence[Mapping[str, Any]],
    *,
    low_reach: float,
    forced_n: int,
    max_pairs: int,
    max_tokens: int,
    seed: int,
) -> dict[str, Any]:
    """The first runs' intervention (``free_n = 0``): the free rate from the evaluation samples.

    Kept so that ``docs/results/exp18`` (configuration ``e9b0f70a5565``) resumes with the
    numbers it was made with.
    """
    free_ok = free_n = forced_ok = forced_total = pairs = 0
    pi_sum = 0.0
    for i, (task, fams, row) in enumerate(zip(tasks, feasible, rows, strict=True)):
        for fam, pi in zip(fams, row["exact_pi"], strict=True):
            if pi >= low_reach or pairs >= max_pairs:
                continue
            pairs += 1
            pi_sum += pi
            label = fam[0]
            for lab in fam:
                stats = row["family_completion"].get(lab, {"correct": 0, "total": 0})
                free_ok += stats["correct"]
                free_n += stats["total"]
            [group] = policy.sample(
                [countdown_prompt(task)],
                n=forced_n,
                max_tokens=max_tokens,
                seed=forced_pair_seed(seed, i, pairs),
                prefix=THINK + entry_prefix(label),
            )
            verdicts = client.verify_batch_pb([(task, s.text) for s in group])
            forced_total += len(verdicts)
            forced_ok += sum(
                v.status == tasks_pb2.CORRECT and v.family.value in fam for v in verdicts
            )
    return {
        "pairs": pairs,
        "mean_pi": round(pi_sum / pairs, 5) if pairs else 0.0,
        "free": round(free_ok / free_n, 4) if free_n else None,
        "free_samples": free_n,
        "forced": round(forced_ok / forced_total, 4) if forced_total else None,
        "forced_samples": forced_total,
    }
