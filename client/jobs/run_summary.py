"""What ``forkgate run`` reports: its figures, the report's data and the one-screen summary.

Example::

    data = report_data(opts, measured, audit)        # {"summary": …, "tasks": …, …}
    print(screen(data["summary"], "127.0.0.1:50051"))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from certd.payloads import task_digest

from ..coverage_metrics import ec_at_k_counts, ec_of_rows, solution_coverage_of_rows
from ..signed_counts import SignedCounts
from ..tasks import as_task


class RunOptions(Protocol):
    """What a summary reads of the run's options (``forkgate.jobs.run.RunOptions``)."""

    k: int
    m: int
    budget: int
    temperature: float
    prefix_template: str
    sampler_name: str


__all__ = ["Measured", "report_data", "screen", "signed_rows", "summary"]


@dataclass
class Measured:
    """What the run measured, before the audit: the report's data."""

    tasks: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    records: list[dict[str, Any]]
    """Every fork-tree record built (their ``samples``: a run statistic nothing signs)."""
    admitted_records: list[dict[str, Any]]
    """The admitted ones, re-emitted from their verified values."""
    signed: SignedCounts
    """What their certificates sign: every family count of the report comes from here."""
    groups: dict[str, Any]
    admitted: int
    refused: list[dict[str, Any]]
    ledger_size: int
    eval_s: float


def report_data(opts: RunOptions, m: Measured, audit: Mapping[str, Any]) -> dict[str, Any]:
    """The report's data: the summary, the per-task rows, the pass@k curve, the groups."""
    rows = m.rows
    signed_rows(rows, m.admitted_records, m.signed, opts.k)
    curve = (
        {k: sum(r["pass_at_k"][k] for r in rows) / len(rows) for k in rows[0]["pass_at_k"]}
        if rows
        else {}
    )
    return {
        "summary": summary(opts, m, curve, audit),
        "k": opts.k,
        "tasks": rows,
        "pass_at_k": curve,
        "groups": dict(m.groups),
        "refused": m.refused,
        "options": {k: str(v) for k, v in vars(opts).items()},
        "notes": [
            f"Evaluation: {opts.k} samples per task at temperature {opts.temperature}. "
            f"Fork trees: up to {opts.m} families per task within {opts.budget} samples, "
            f"forcing '{opts.prefix_template}' for uncovered families with half the budget.",
        ],
    }


def signed_rows(
    rows: list[dict[str, Any]],
    records: list[dict[str, Any]],
    signed: SignedCounts,
    k: int,
) -> None:
    """Set each row's ``certified`` (distinct labels the task's certificates sign) and, where
    a certificate signs it, its ``feasible`` (the signed enumeration; ``feasible_source``
    says which) and the EC@K that depends on it. Nothing is read from a record's own counts.
    """
    by_digest = {str(r["task_digest"]): r for r in records if "task_digest" in r}
    for row in rows:
        digest = task_digest(as_task(row["task"]))
        row["certified"] = len(signed.certified.get(digest, ()))
        fams = by_digest.get(digest, {}).get("families", [])
        row["certified_forced"] = sum(bool(f.get("forced")) for f in fams)
        feasible = signed.feasible_families.get(digest)
        row["feasible_source"] = "enumeration" if feasible is None else "signed"
        if feasible is not None and feasible != row["feasible"]:
            row["feasible"] = feasible
            row["ec_at_k"] = ec_at_k_counts(
                row["family_correct"], n=row["samples"], k=min(k, row["samples"]), feasible=feasible
            )


def summary(
    opts: RunOptions, m: Measured, curve: Mapping[str, float], audit: Mapping[str, Any]
) -> dict[str, Any]:
    """The flat figures of ``summary.json`` and the screen."""
    rows, groups = m.rows, m.groups
    samples = sum(r["samples"] for r in rows)
    correct = sum(r["correct"] for r in rows)
    fte = [r["first_token_entropy"] for r in rows if r["first_token_entropy"] is not None]
    fork_samples = sum(int(r.get("samples", 0)) for r in m.records)
    per_task = max(1, len(rows))
    return {
        "sampler": opts.sampler_name,
        "tasks": len(m.tasks),
        "samples": samples + fork_samples,
        "samples_evaluation": samples,
        "samples_fork_trees": fork_samples,
        "correct_evaluation": correct,
        "pass@1": round(correct / samples, 4) if samples else 0.0,
        f"pass@{opts.k}": round(curve.get(str(opts.k), 0.0), 4),
        **ec_of_rows(rows, opts.k),
        **solution_coverage_of_rows(rows),
        "entry_entropy": round(sum(r["entry_entropy"] for r in rows) / per_task, 4),
        "first_token_entropy": round(sum(fte) / len(fte), 4) if fte else None,
        "families_feasible": sum(r["feasible"] for r in rows),
        "families_certified": sum(r["certified"] for r in rows),
        "families_certified_forced": sum(r["certified_forced"] for r in rows),
        "fork_trees_full": sum(r["certified"] >= min(opts.m, r["feasible"]) for r in rows),
        "stratified_groups": groups.get("stratified_groups", 0),
        "grpo_groups_without_signal": groups.get("grpo_groups_without_signal", 0),
        "signal_in_flat_grpo_groups": groups.get("signal_in_flat_grpo_groups", 0),
        "records_admitted": m.admitted,
        "records_refused": len(m.refused),
        "ledger_size": m.ledger_size,
        "audit": {k: "OK" if v["ok"] else f"FAILED {v['faults']}" for k, v in audit.items()},
        "seconds_evaluation": round(m.eval_s, 1),
    }


def screen(s: Mapping[str, Any], address: str) -> str:
    k = next(x for x in s if x.startswith("EC@"))[3:]
    fte = s["first_token_entropy"]
    return "\n".join(
        [
            f"ForkGate run — sampler {s['sampler']}, certd on {address}",
            f"  tasks                {s['tasks']} Countdown puzzles",
            f"  samples              {s['samples']} ({s['samples_evaluation']} evaluation, "
            f"{s['samples_fork_trees']} for fork trees)",
            f"  verified correct     {s['correct_evaluation']} of {s['samples_evaluation']} "
            f"evaluation samples",
            f"  {f'pass@1 / pass@{k}':21}{s['pass@1']:.3f} / {s[f'pass@{k}']:.3f}",
            f"  {f'EC@{k}':21}{s[f'EC@{k}']:.3f} (mean over tasks; multi-family tasks: "
            f"{_fmt_multi(s.get(f'EC@{k} multi'))} over {s.get('multi_tasks', 0)})",
            f"  solution coverage    {_fmt_multi(s.get('solution_coverage'))} "
            f"({s.get('distinct_solutions', 0)} distinct canonical of {s.get('solutions', 0)} "
            "correct samples)",
            f"  entry entropy        {s['entry_entropy']:.3f} nats"
            + (f"; first-token entropy {fte:.3f} nats" if fte is not None else ""),
            f"  families certified   {s['families_certified']} of {s['families_feasible']} "
            f"feasible ({s['families_certified_forced']} through a forced entry)",
            f"  fork trees full      {s['fork_trees_full']} of {s['tasks']} tasks have min(m, "
            "feasible) families certified",
            f"  stratified groups    {s['stratified_groups']} (task, κ) groups; "
            f"{s['grpo_groups_without_signal']} plain GRPO groups had no signal",
            f"  ratchet              {s['records_admitted']} records admitted, "
            f"{s['records_refused']} refused",
            f"  ledger audit         {_fmt_audit(s['audit'])} ({s['ledger_size']} entries)",
            f"  report               {s['report']} ({s['seconds']} s)",
        ]
    )


def _fmt_multi(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def _fmt_audit(a: Mapping[str, str]) -> str:
    return ", ".join(f"{'over gRPC' if k == 'grpc' else 'of the files'} {v}" for k, v in a.items())
