"""Acceptance certificates on the embedded Countdown policy (the real, shipped model).

Three checkpoints of ``forkgate.jobs.policy``: the shipped weights (the run's baseline), the same
weights fine-tuned on verified solutions of the 3-number band only (band-3 pass@1 soars while
the 4-number band's support erodes: refused), and fine-tuned on both bands (support-aware
mixing: accepted). certd on loopback draws the prompts and verifies every sample.
``pytest -s`` prints the decisions as ``forkgate guard`` does (docs/support-guard.md).
"""

from __future__ import annotations

import copy
import hashlib
import random
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the embedded policy needs torch (the train extra)")

from forkgate import CertdClient  # noqa: E402
from forkgate.acceptance import (  # noqa: E402
    evaluate_checkpoint,
    list_acceptances,
    register_task_set,
)
from forkgate.jobs.guard_demo import distinct_puzzles  # noqa: E402
from forkgate.jobs.policy.format import compact_prompt  # noqa: E402
from forkgate.jobs.policy.policy import Policy  # noqa: E402
from forkgate.jobs.policy.train import example, sft_step  # noqa: E402
from forkgate.jobs.support_report import decisions_table  # noqa: E402

pytestmark = pytest.mark.slow

BANDS = {
    "band-3": distinct_puzzles(24, numbers=3, seed=1, target_range=(10, 200)),
    "band-4": distinct_puzzles(24, numbers=4, seed=2),
}


def _digest(policy: Policy) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(policy.model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().numpy().tobytes())
    return h.hexdigest()


def _sampler(policy: Policy) -> Any:
    def sample(task_set: str, task: Any, k: int) -> list[str]:
        t = {"numbers": list(task.countdown.numbers), "target": task.countdown.target}
        [group] = policy.sample([compact_prompt(t)], n=k, max_tokens=80, seed=1)
        return [s.text for s in group]

    return sample


def _sft(base: Policy, solutions: Sequence[tuple[Any, str]], steps: int) -> Policy:
    torch.manual_seed(0)
    policy = copy.deepcopy(base)
    opt = torch.optim.AdamW(policy.model.parameters(), lr=1e-3)
    rng = random.Random(0)
    for _ in range(steps):
        sft_step(policy, [example(policy, t, w) for t, w in rng.sample(solutions, 32)], opt)
    policy.model.eval()
    return policy


@pytest.fixture()
def client(address: str, vkey: str) -> Iterator[CertdClient]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with CertdClient(address, trusted_keys=[vkey]) as c:
        for name, tasks in BANDS.items():
            register_task_set(
                c, name, tasks, k=8, tolerance_best_at_k=0.10,
                route_kappa="countdown.first-op.v1", route_field="operator",
            )  # fmt: skip
        yield c
    torch.set_num_threads(threads)


def test_embedded_policy_trained_on_one_band_is_refused(client: CertdClient) -> None:
    base = Policy.load()
    solutions = {
        name: [(t, fl.witness) for t in tasks for fl in client.enumerate_families(t).labels]
        for name, tasks in BANDS.items()
    }

    def evaluate(name: str, policy: Policy) -> Any:
        return evaluate_checkpoint(
            client, _sampler(policy), run="tiny", checkpoint=name,
            checkpoint_digest=_digest(policy), target="band-3",
        )  # fmt: skip

    baseline = evaluate("shipped", base)
    assert baseline.accepted
    before = {f.task_set: f for f in baseline.figures}
    assert before["band-4"].best_at_k > 0.15  # the shipped model solves some 4-number puzzles

    narrow = evaluate("sft-band-3", _sft(base, solutions["band-3"], 80))
    figures = {f.task_set: f for f in narrow.figures}
    assert figures["band-3"].pass_at_1 > before["band-3"].pass_at_1 + 0.3  # the target soared
    assert not narrow.accepted and narrow.refusal.reason == "CAPABILITY_FELL"
    fell = {(d.task_set, d.metric) for d in narrow.refusal.drops}
    assert ("band-4", "best_at_k") in fell and {t for t, _ in fell} == {"band-4"}
    assert figures["band-4"].ser.estimate > 0.3

    mixed = evaluate("sft-both", _sft(base, solutions["band-3"] + solutions["band-4"], 80))
    assert mixed.accepted, mixed.refusal.detail
    figures = {f.task_set: f for f in mixed.figures}
    assert figures["band-4"].best_at_k >= before["band-4"].best_at_k
    print("\n" + decisions_table(list_acceptances(client, "tiny")))
