"""The whole trainer-side path on loopback: a sampler, certd, fork trees, advantages, ratchet.

The policy is a plain function that has collapsed onto one entry family (it only ever writes
the (4, *) solution, or wrong answers), so the builder has to force the other families' entry
prefixes to find their witnesses.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch

from certd.domains import countdown as cd
from forkgate import CertdClient
from forkgate.advantages import StratifiedAdvantages
from forkgate.certified import CertifiedDataset
from forkgate.forktree import ForkTreeBuilder
from forkgate.ratchet import Ratchet
from forkgate.samplers import CallableSampler

TASKS = [
    {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83},
    {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 93},
    {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 95},
]


def _witnesses(task: dict[str, object]) -> dict[str, str]:
    t = cd.CountdownTask(numbers=tuple(task["numbers"]), target=int(task["target"]))  # type: ignore[arg-type]
    return {lw.label: lw.witness for lw in cd.enumerate_families(t).labels}


def collapsed_policy(prompt: str, rng: random.Random) -> str:
    """Writes one family's solution, or a wrong answer; completes a forced entry if it can."""
    task = next(t for t in TASKS if f"equals {t['target']}." in prompt)
    witnesses = _witnesses(task)
    forced = prompt.rsplit("</answer>.\n", 1)[1]  # what follows the prompt: a forced entry
    if forced:
        forced = forced.removeprefix("<answer>")
        for w in witnesses.values():
            if w.startswith(forced):
                return w[len(forced) :] + "</answer>"
        return "1</answer>"
    first = sorted(witnesses.items())[0][1]
    return f"<answer>{first}</answer>" if rng.random() < 0.5 else "<answer>1+2</answer>"


def test_fork_trees_advantages_and_ratchet(address: str, vkey: str, tmp_path: Path) -> None:
    out = tmp_path / "forktrees.jsonl"
    with CertdClient(address, trusted_keys=[vkey]) as client:
        builder = ForkTreeBuilder(
            client,
            CallableSampler(collapsed_policy),
            m=3,
            budget=40,
            round_size=8,
            force_prefix=True,
        )
        first = builder.run(TASKS[:2], out)
        out.write_text(out.read_text() + '{"task": {"numbers": [1')  # a crash mid-write
        rest = builder.run(TASKS, out)  # resumes: only the third task is new
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert [r["task_digest"] for r in lines] == [r["task_digest"] for r in first + rest]
        assert len(first) == 2 and len(rest) == 1

        rec83 = lines[0]
        assert len(rec83["families"]) == 3 and rec83["complete"]
        assert any(f["forced"] for f in rec83["families"])  # found only by forcing an entry
        assert any(not f["forced"] for f in rec83["families"])
        assert rec83["samples"] <= 40 and rec83["negatives"]
        assert set(rec83["uncovered"]) <= {"25,-", "3,+", "3,-", "4,*"}

        # stratified advantages over the rollouts the trees came from
        rewards = torch.tensor([1.0, 1.0, 0.0, 1.0])
        adv = StratifiedAdvantages()(rewards, ["q83"] * 4, ["4,*", "4,*", "4,*", "3,+"])
        assert adv[3] > 0 and adv[2] < 0

        ratchet = Ratchet(
            [vkey],
            kappas={"countdown.first-op.v1"},
            consistency=lambda a, b: client.consistency_proof(a, b).hashes,
        )
        admitted = list(CertifiedDataset.from_jsonl(out, ratchet))
        assert len(admitted) == 3
        bad = dict(rec83, families=[dict(rec83["families"][0], witness="25*4-5*4+3")])
        assert not ratchet.admit(bad).admitted
