"""The experiment package's parts: teacher-forced family probabilities on a tiny policy,
arm specs, losses (PPO-clip, KL-Cov, Clip-Cov, the null), the resumable JSONL, the verdicts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from forkgate.advantages import grpo_advantages
from forkgate.entry import feasible_mass
from forkgate.forktree import countdown_prompt
from forkgate.jobs.experiment.analysis import intervention_summary, paired, pareto, verdicts
from forkgate.jobs.experiment.arms import parse_arm
from forkgate.jobs.experiment.losses import policy_loss, shuffled_rewards
from forkgate.jobs.experiment.options import ExperimentOptions
from forkgate.jobs.experiment.policyops import entry_prefix, family_logprobs
from forkgate.jobs.experiment.protocol import config_key, done_runs
from forkgate.jobs.experiment.seeds import (
    RunSeeds,
    forced_pair_seed,
    pool_sample_seed,
    rollout_seed,
)
from forkgate.jobs.policy.format import THINK
from forkgate.jobs.policy.model import PolicyConfig
from forkgate.jobs.policy.policy import Policy

TASK = {"numbers": [3, 4, 5], "target": 12}
EXP18 = Path(__file__).resolve().parents[2] / "docs" / "results" / "exp18"


def _by_hand(policy: Policy, text: str) -> float:
    """P(text | prompt + <think>), one next-token softmax at a time."""
    tok = policy.tokenizer
    ids = [*policy.prompt_ids(countdown_prompt(TASK)), *tok.encode(THINK)]
    p = 1.0
    for t in tok.encode(text):
        with torch.no_grad():
            logits, _ = policy.model(torch.tensor([ids]))
        p *= float(torch.softmax(logits[0, -1].double(), dim=-1)[t])
        ids.append(t)
    return p


def test_teacher_forced_family_probabilities_match_a_hand_computation() -> None:
    policy = Policy.new(PolicyConfig(vocab_size=28, d_model=16, n_layer=1, n_head=2), seed=3)
    labels = ["3,+", "4,*", "5,-", "34,+"]
    with torch.no_grad():
        got = family_logprobs(policy, TASK, labels).exp().tolist()
    for label, p in zip(labels, got, strict=True):
        assert p == pytest.approx(_by_hand(policy, entry_prefix(label)), rel=1e-4)
    # Disjoint prefixes: every operand x operator entry together has mass <= 1.
    every = [f"{n},{op}" for n in (3, 4, 5) for op in "+-*/"]
    with torch.no_grad():
        mass = family_logprobs(policy, TASK, every).exp().tolist()
    assert 0 < feasible_mass(mass) <= 1


def test_arm_specs_and_their_knobs() -> None:
    assert parse_arm("grpo+kl@0.1").kl_weight == 0.1
    assert parse_arm("grpo+replay@2").replay_weight == 2.0
    assert parse_arm("strat-v2").needs_forktrees and not parse_arm("grpo").needs_forktrees
    for bad in ("nope", "grpo@1", "grpo+kl@x", "grpo+kl@-1"):
        with pytest.raises(ValueError):
            parse_arm(bad)


def test_standard_grpo_and_the_null() -> None:
    adv = grpo_advantages([1.0, 0.0, 1.0, 0.0, 0.0, 0.0], ["a", "a", "b", "b", "c", "c"])
    assert [round(a, 3) for a in adv] == [1.0, -1.0, 1.0, -1.0, 0.0, 0.0]
    r = [1.0, 0.0, 0.1, 0.0, 1.0]
    assert sorted(shuffled_rewards(r, 1)) == sorted(r)


def _lp() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    lp = (torch.randn(4, 5) - 2).requires_grad_()
    mask = torch.ones(4, 5)
    mask[0, 3:] = 0
    return lp, mask, torch.tensor([1.0, -1.0, 2.0, 0.5])


def test_on_policy_pg_loss_is_minus_advantage_times_mean_logprob_gradient() -> None:
    lp, mask, adv = _lp()
    policy_loss(lp, lp.detach(), adv, mask).backward()
    ref = lp.detach().clone().requires_grad_()
    (-(adv * (ref * mask).sum(1) / mask.sum(1)).mean()).backward()
    assert lp.grad is not None and ref.grad is not None
    assert torch.allclose(lp.grad, ref.grad)


def test_kl_cov_penalises_only_off_policy_tokens_and_clip_cov_removes_some_gradient() -> None:
    lp, mask, adv = _lp()
    base = policy_loss(lp, lp.detach(), adv, mask, kind="pg")
    assert policy_loss(lp, lp.detach(), adv, mask, kind="kl-cov").item() == pytest.approx(
        base.item()
    )
    moved = lp.detach() + 0.1
    assert (
        policy_loss(lp, moved, adv, mask, kind="kl-cov", cov_ratio=0.5).item()
        > policy_loss(lp, moved, adv, mask).item()
    )
    g_pg = torch.autograd.grad(policy_loss(lp, lp.detach(), adv * 10, mask), lp)[0]
    g_cc = torch.autograd.grad(
        policy_loss(
            lp, lp.detach(), adv * 10, mask, kind="clip-cov", cov_ratio=0.5, cov_bounds=(0.0, 1e9)
        ),
        lp,
    )[0]
    zeroed = (g_cc == 0) & (g_pg != 0)
    assert 0 < int(zeroed.sum()) <= int(0.5 * mask.sum())
    with pytest.raises(ValueError):
        policy_loss(lp, lp.detach(), adv, mask, kind="entropy")


def test_results_file_resumes_per_configuration_and_survives_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    key = config_key(ExperimentOptions())
    assert config_key(ExperimentOptions(seeds=(7,), workdir=Path("x"))) == key  # not size
    assert config_key(ExperimentOptions(steps=3)) != key
    path.write_text(
        json.dumps({"arm": "grpo", "seed": 0, "config": key}) + "\n"
        + json.dumps({"arm": "grpo", "seed": 1, "config": "other"}) + "\n"
        + '{"arm": "strat-v2", "se'
    )  # fmt: skip
    assert done_runs(path, key) == {("grpo", 0)}
    assert done_runs(tmp_path / "none.jsonl", key) == set()


def _runs(ec: dict[str, list[float]], p1: dict[str, list[float]]) -> dict[str, dict[int, Any]]:
    return {
        arm: {s: {"end": {"EC@16": e, "pass@1": p1[arm][s]}} for s, e in enumerate(vals)}
        for arm, vals in ec.items()
    }


START = [0.55, 0.56, 0.54]
FLAT = [0.30, 0.30, 0.30]


def test_verdict_confirmed_refuted_between_and_insufficient() -> None:
    p1 = {
        a: FLAT
        for a in ("start", "grpo", "grpo-unscored", "grpo+replay", "grpo+unbal-replay", "strat-v2")
    }
    good = _runs(
        {
            "start": START,
            "grpo": [0.40, 0.41, 0.39],
            "grpo-unscored": [0.45, 0.46, 0.44],
            "grpo+replay": [0.46, 0.45, 0.47],
            "grpo+unbal-replay": [0.40, 0.41, 0.42],
            "strat-v2": [0.52, 0.53, 0.51],
        },
        p1,
    )
    v = verdicts(good)
    assert v["overall"] == "Confirmed" and all(v["criteria"].values())
    null = _runs(
        {
            "start": START,
            "grpo": [0.40, 0.41, 0.39],
            "grpo-unscored": [0.45, 0.46, 0.44],
            "grpo+replay": [0.46, 0.45, 0.47],
            "grpo+unbal-replay": [0.46, 0.45, 0.47],
            "strat-v2": [0.45, 0.455, 0.44],
        },
        p1,
    )
    assert verdicts(null)["overall"] == "Refuted"
    p1_moved = {**p1, "strat-v2": [0.20, 0.21, 0.19]}  # pass@1 not matched: cannot refute
    assert (
        verdicts(
            _runs(
                {
                    k: v
                    for k, v in [
                        ("grpo-unscored", [0.45, 0.46, 0.44]),
                        ("strat-v2", [0.45, 0.455, 0.44]),
                    ]
                },
                p1_moved,
            )
        )["overall"]
        == "between"
    )
    one_seed = _runs({"grpo-unscored": [0.45], "strat-v2": [0.50]}, p1)
    assert verdicts(one_seed)["overall"] == "insufficient data"
    assert paired(one_seed, "strat-v2", "grpo-unscored", "EC@16") is None


def test_paired_interval_and_pareto_front() -> None:
    runs = _runs(
        {"a": [0.5, 0.6, 0.7], "b": [0.4, 0.5, 0.6]}, {"a": [0.3, 0.3, 0.3], "b": [0.4, 0.4, 0.4]}
    )
    p = paired(runs, "a", "b", "EC@16")
    assert (
        p is not None
        and p["mean"] == pytest.approx(10.0)
        and p["t95"] == pytest.approx([10.0, 10.0])
    )
    front = {q["arm"]: q["frontier"] for q in pareto(runs)}
    assert front == {"a": True, "b": True}  # neither dominates the other


def test_the_committed_results_keep_their_configuration_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """docs/results/exp18 resumes only while the CLI gives run.sh's SIZE the key it ran with."""
    import forkgate.jobs.experiment as experiment
    from forkgate.cli import main

    match = re.search(r'^SIZE="([^"]+)"$', (EXP18 / "run.sh").read_text(), re.M)
    assert match, "run.sh defines SIZE"
    lines = (EXP18 / "results.jsonl").read_text().splitlines()
    assert {json.loads(line)["config"] for line in lines} == {"e9b0f70a5565"}
    seen: list[ExperimentOptions] = []

    def record(opts: ExperimentOptions, *, as_json: bool = False) -> int:
        seen.append(opts)
        return 0

    monkeypatch.setattr(experiment, "run_experiment", record)
    argv = ["experiment", "countdown", "--workdir", str(tmp_path), *match.group(1).split()]
    assert main([*argv, "--seed", "0", "--arm", "grpo"]) == 0
    assert [config_key(o) for o in seen] == ["e9b0f70a5565"]


@pytest.mark.parametrize("run", [0, 1, 2, 17])
def test_the_seeding_block_draws_the_seeds_the_results_were_made_with(run: int) -> None:
    """The arithmetic before the seeds moved into one block (committed results depend on it)."""
    s = RunSeeds(run)
    assert (s.torch, s.steps, s.replay, s.intervention) == (run, run, run, run)
    assert s.evaluation == 104729 + run
    for step in (1, 2, 60):
        assert s.rollouts(step) == run * 1_000_003 + 1000 * step
        assert s.shuffle(step) == run * 977 + step
        assert [s.token_selection(step, k) for k in (0, 1)] == [run + step * 13 + k for k in (0, 1)]
        assert [s.coverage(step, i) for i in (0, 5)] == [run * 7919 + step * 31 + i for i in (0, 5)]
    assert rollout_seed(11, 3, 2) == 11 + 7 * 3 + 104723 * 2
    assert forced_pair_seed(11, 4, 9) == 11 + 31 * 4 + 9
    assert pool_sample_seed(0, 5) == 5


def _iv(pi: float, free: float, hits: int, forced: float) -> dict[str, Any]:
    return {"pairs": 4, "mean_pi": pi, "free": free, "free_hits": hits, "free_samples": 256,
            "forced": forced, "forced_samples": 32}  # fmt: skip


def test_intervention_summary_pools_seeds_and_pairs_end_with_start() -> None:
    end = {0: _iv(0.01, 0.5, 2, 0.25), 1: _iv(0.03, 0.0, 6, 0.5)}
    start = {0: _iv(0.1, 0.5, 8, 0.5), 1: _iv(0.2, 0.25, 8, 0.5)}
    runs = {
        "start": {0: {"end": {}, "intervention": _iv(0.1, 0.5, 10, 0.5)}},
        "grpo": {s: {"intervention": end[s], "intervention_start": start[s]} for s in (0, 1)},
    }
    out = intervention_summary(runs)
    assert list(out) == ["grpo"]  # the start record has no starting-policy comparison
    g = out["grpo"]
    # free pooled over the entries, not averaged over seeds: (0.5·2 + 0·6) / 8
    assert g["end"]["free"] == 0.125 and g["end"]["free_hits"] == 8
    assert g["start"]["free"] == 0.375 and g["end"]["mean_pi"] == 0.02
    assert g["end"]["forced"] == 0.375 and g["end"]["pairs"] == 8
    assert g["Δforced"]["diffs"] == [-25.0, 0.0]  # per seed, end − start, points


def test_intervention_summary_without_entries_says_none_not_zero() -> None:
    empty = {**_iv(0.0, 0.0, 0, 0.0), "free": None, "pairs": 0, "forced": None}
    empty["forced_samples"] = 0
    runs = {"grpo": {s: {"intervention": empty, "intervention_start": empty} for s in (0, 1)}}
    g = intervention_summary(runs)["grpo"]
    assert g["end"]["free"] is None and g["end"]["forced"] is None and "Δforced" not in g
