"""The experiment's data: certified fork trees (admitted by the ratchet) and the replay pools."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from certd.v1 import tasks_pb2

from ...client import CertdClient
from ...forktree import ForkTreeBuilder, countdown_prompt
from ...ratchet import Ratchet
from ..embedded import EmbeddedSampler
from ..policy.format import first_step_label
from ..policy.policy import Policy
from .seeds import pool_sample_seed

__all__ = ["KAPPA", "admitted_forktrees", "natural_pool"]

KAPPA = "countdown.first-op.v1"
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def _consistent(label: str, witness: str) -> bool:
    """The witness's reasoning can open with its family's entry (as the policy was trained)."""
    try:
        return first_step_label(witness) == label
    except ValueError:
        return False  # a witness the format cannot write (certd accepted it anyway)


def admitted_forktrees(
    client: CertdClient,
    policy: Policy,
    tasks: Sequence[Mapping[str, Any]],
    out: Path,
    *,
    vkey: str,
    budget: int,
    max_tokens: int,
    seed: int,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Fork trees of the tasks (resumable file), admitted by a ratchet; consistent witnesses.

    Returns:
        (admitted records with their families filtered to consistent witnesses, counts).
    """
    builder = ForkTreeBuilder(
        client,
        EmbeddedSampler(policy=policy),
        m=4,
        budget=budget,
        round_size=16,
        max_tokens=max_tokens,
        force_prefix=True,
        prefix_template="<think>{operand}{operator}",
        seed=seed,
    )
    builder.run(tasks, out)  # returns only the records it built now: read the whole file
    records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines() if x.strip()]
    ratchet = Ratchet(
        [vkey], kappas={KAPPA}, consistency=lambda a, b: client.consistency_proof(a, b).hashes
    )
    admitted: list[dict[str, Any]] = []
    for rec in records:
        if rec["families"] and ratchet.admit(rec).admitted:
            fams = [f for f in rec["families"] if _consistent(f["label"], f["witness"])]
            if fams:
                admitted.append({"task": rec["task"], "families": fams})
    counts = {
        "records": len(records),
        "admitted": len(admitted),
        "families": sum(len(r["families"]) for r in admitted),
        "samples": sum(int(r.get("samples", 0)) for r in records),
    }
    return admitted, counts


def natural_pool(
    client: CertdClient,
    policy: Policy,
    tasks: Sequence[Mapping[str, Any]],
    *,
    n: int,
    max_tokens: int,
    seed: int,
) -> tuple[list[dict[str, Any]], int]:
    """The unbalanced control's pool: the starting policy's verified-correct samples, as drawn.

    A family appears once per correct sample, so its replay weight is its natural frequency.

    Returns:
        (records ``{"task", "families": [{"label", "witness"}, …]}``, samples drawn).
    """
    pool = []
    drawn = 0
    for i, task in enumerate(tasks):
        [group] = policy.sample(
            [countdown_prompt(task)], n=n, max_tokens=max_tokens, seed=pool_sample_seed(seed, i)
        )
        drawn += len(group)
        verdicts = client.verify_batch_pb([(task, s.text) for s in group])
        fams = []
        for s, v in zip(group, verdicts, strict=True):
            m = _ANSWER.search(s.text)
            if v.status == tasks_pb2.CORRECT and m and _consistent(v.family.value, m.group(1)):
                fams.append({"label": v.family.value, "witness": m.group(1).strip()})
        if fams:
            pool.append({"task": dict(task), "families": fams})
    return pool, drawn
