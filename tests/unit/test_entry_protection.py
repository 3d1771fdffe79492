"""Entry-level protection in the library: informed stratified advantages, exact entry metrics,
entry masks and KL, family replay and fork coverage. Hostile and edge cases included."""

from __future__ import annotations

import math

import pytest
import torch

from forkgate.advantages import informed_stratified_advantages
from forkgate.entry import (
    batch_entry_entropy,
    entry_kl,
    entry_token_count,
    feasible_entropy,
    feasible_mass,
    reach_at_k,
    unscore_entry,
)
from forkgate.replay import FamilyReplay, coverage_plan

# --- informed stratified advantages (v2) -------------------------------------------------


def test_v2_worked_example_by_hand() -> None:
    # q: family A rewards 1, 0, 1; family B one failure. V(q) = 2/4 = 0.5.
    total, entry = informed_stratified_advantages(
        [1.0, 0.0, 1.0, 0.0], ["q"] * 4, ["A", "A", "A", "B"], prior_weight=1.0
    )
    v_a = (2 + 0.5) / (3 + 1)  # 0.625
    v_b = (0 + 0.5) / (1 + 1)  # 0.25
    assert entry == pytest.approx([v_a - 0.5] * 3 + [v_b - 0.5])
    execution = [1 - 0.5, 0 - 1.0, 1 - 0.5, 0.0]  # leave-one-out within A; singleton B: 0
    assert total == pytest.approx([e + x for e, x in zip(entry, execution, strict=True)])


def test_v2_a_singleton_failure_is_judged_against_the_question_not_a_constant_half() -> None:
    # Mean reward 0.3 over ten rollouts; one rare family fails once. v1's Laplace default
    # would give it r - 0.5 = -0.5; v2 gives (0 + 0.3)/2 - 0.3 = -0.15.
    rewards = [1.0, 1.0, 1.0] + [0.0] * 7
    fams = ["A"] * 9 + ["rare"]
    total, entry = informed_stratified_advantages(rewards, ["q"] * 10, fams)
    v_q = 0.3
    assert entry[-1] == pytest.approx((0 + v_q) / 2 - v_q)
    assert total[-1] == pytest.approx(entry[-1])  # no execution term for a singleton


def test_v2_all_zero_rewards_give_zero_advantages() -> None:
    total, entry = informed_stratified_advantages([0.0] * 6, ["q"] * 3 + ["p"] * 3, list("ABCAAB"))
    assert total == [0.0] * 6 and entry == [0.0] * 6


def test_v2_one_family_only_has_no_entry_term() -> None:
    total, entry = informed_stratified_advantages([1.0, 0.0, 0.0], ["q"] * 3, ["A"] * 3)
    assert entry == pytest.approx([0.0] * 3)
    assert total == pytest.approx([1.0, -0.5, -0.5])


def test_v2_forced_rollouts_inform_the_family_value_but_get_no_entry_term() -> None:
    # Free: A fails twice. Forced into B: succeeds twice. V(q) comes from the free ones only.
    total, entry = informed_stratified_advantages(
        [0.0, 0.0, 1.0, 1.0], ["q"] * 4, ["A", "A", "B", "B"], forced=[False, False, True, True]
    )
    assert entry[2:] == [0.0, 0.0]
    assert entry[0] == pytest.approx((0 + 0) / 3 - 0.0)  # V(q) = 0 (free rollouts)
    assert total[2:] == pytest.approx([0.0, 0.0])  # B's execution term: 1 - 1


def test_v2_rejects_mismatched_lengths_and_negative_weight() -> None:
    with pytest.raises(ValueError, match="equal lengths"):
        informed_stratified_advantages([1.0], ["q", "q"], ["A"])
    with pytest.raises(ValueError, match="prior_weight"):
        informed_stratified_advantages([1.0], ["q"], ["A"], prior_weight=-1)
    assert informed_stratified_advantages([], [], []) == ([], [])


def test_v2_entry_weight_zero_leaves_only_the_execution_term() -> None:
    total, _ = informed_stratified_advantages(
        [1.0, 0.0, 1.0], ["q"] * 3, ["A", "A", "B"], entry_weight=0.0
    )
    assert total == pytest.approx([1.0, -1.0, 0.0])


# --- exact entry metrics -----------------------------------------------------------------


def test_reach_entropy_mass_by_hand() -> None:
    probs = [0.5, 0.25, 0.0]
    assert reach_at_k(probs, 2) == pytest.approx((0.75 + (1 - 0.75**2) + 0) / 3)
    assert feasible_mass(probs) == pytest.approx(0.75)
    h = -(2 / 3) * math.log(2 / 3) - (1 / 3) * math.log(1 / 3)
    assert feasible_entropy(probs) == pytest.approx(h)
    assert feasible_entropy([0.0, 0.0]) == 0.0  # no mass on feasible entries at all


@pytest.mark.parametrize("bad", [[1.2], [-0.1], [0.6, 0.6], [float("nan")]])
def test_exact_metrics_refuse_impossible_probabilities(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        reach_at_k(bad, 4)


def test_reach_needs_families_and_k() -> None:
    with pytest.raises(ValueError, match="feasible"):
        reach_at_k([], 4)
    with pytest.raises(ValueError, match="k"):
        reach_at_k([0.1], 0)


# --- entry masks, KL, batch entropy ------------------------------------------------------


def test_entry_token_count() -> None:
    assert entry_token_count("<think>25-5=20</think>") == 3
    assert entry_token_count("4*3=12") == 2
    assert entry_token_count("<think></think><answer>7</answer>") == 0
    assert entry_token_count("<think>25") == 0  # no operator yet: no entry decided


def test_unscore_entry_clears_exactly_the_entry() -> None:
    mask = torch.ones((2, 6), dtype=torch.bool)
    unscore_entry(mask, [1, 0], [2, 0])
    assert mask.tolist() == [[True, False, False, True, True, True], [True] * 6]
    with pytest.raises(ValueError):
        unscore_entry(mask, [1], [2])
    with pytest.raises(ValueError):
        unscore_entry(mask, [1, -1], [2, 0])


def test_entry_kl_is_zero_at_the_reference_and_restores_a_lost_family() -> None:
    ref = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    assert entry_kl(ref.clone(), ref).item() == pytest.approx(0.0, abs=1e-7)
    logits = torch.log(torch.tensor([0.9, 0.09, 0.01])).requires_grad_()
    loss = entry_kl(logits, ref)
    assert loss.item() > 0
    loss.backward()
    assert logits.grad is not None and logits.grad[2] < 0  # descent raises the lost family
    assert entry_kl(torch.tensor([-3.0]), torch.tensor([-1.0])).item() == pytest.approx(0.0)
    with pytest.raises(ValueError):
        entry_kl(torch.zeros(2), torch.zeros(3))
    with pytest.raises(ValueError):
        entry_kl(torch.zeros(0), torch.zeros(0))


def test_entry_kl_ignores_mass_outside_the_feasible_entries() -> None:
    # Scaling every feasible probability by the same factor (mass moved to dead entries)
    # leaves the renormalised distribution, hence the KL, unchanged.
    ref = torch.log(torch.tensor([0.5, 0.3]))
    assert entry_kl(ref + math.log(0.1), ref).item() == pytest.approx(0.0, abs=1e-6)


def test_batch_entry_entropy_is_per_question() -> None:
    h = batch_entry_entropy(["a", "a", "b", "b"], ["x", "y", "z", "z"])
    assert h == pytest.approx(math.log(2) / 2)
    assert batch_entry_entropy([], []) == 0.0
    with pytest.raises(ValueError):
        batch_entry_entropy(["a"], [])


# --- replay and coverage -----------------------------------------------------------------

TASK = {"numbers": [3, 4, 5], "target": 12}
A, B = {"label": "3,+", "witness": "3+4+5"}, {"label": "5,+", "witness": "5+3+4"}
RECORDS = [
    {"task": TASK, "families": [A, B]},
    {"task": {"numbers": [2, 6], "target": 12}, "families": [{"label": "2,*", "witness": "2*6"}]},
]


def test_balanced_replay_gives_every_certified_family_one_slot_per_epoch() -> None:
    replay = FamilyReplay(RECORDS + RECORDS, seed=3)  # duplicates do not gain weight
    assert len(replay) == 3
    draws = [it.family for it in replay.sample(30)]
    assert {f: draws.count(f) for f in set(draws)} == {"3,+": 10, "5,+": 10, "2,*": 10}


def test_unbalanced_replay_keeps_natural_frequencies() -> None:
    pool = [
        {
            "task": TASK,
            "families": [{"label": "3,+", "witness": "3+4+5"}] * 3
            + [{"label": "5,+", "witness": "5+3+4"}],
        }
    ]
    replay = FamilyReplay(pool, balanced=False, seed=0)
    draws = [it.family for it in replay.sample(40)]
    assert draws.count("3,+") == 30 and draws.count("5,+") == 10


def test_replay_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no certified"):
        FamilyReplay([{"task": TASK, "families": []}])


def test_coverage_plan_keeps_the_group_size_and_a_free_rollout() -> None:
    plan = coverage_plan(RECORDS[0], group_size=16, m=2, per_family=2, seed=0)
    assert sorted(p.family for p in plan) == ["3,+", "5,+"] and sum(p.n for p in plan) == 4
    # m larger than the certified families: fewer forced rollouts, never more.
    assert len(coverage_plan(RECORDS[1], group_size=16, m=4, per_family=2, seed=0)) == 1
    # A tiny group: at least one rollout stays free.
    tiny = coverage_plan(RECORDS[0], group_size=3, m=2, per_family=2, seed=0)
    assert sum(p.n for p in tiny) <= 2
    assert coverage_plan(None, group_size=16, m=2, per_family=2, seed=0) == []
    assert (
        coverage_plan(RECORDS[0], group_size=16, m=2, per_family=2, seed=0, exclude=["3,+", "5,+"])
        == []
    )
    with pytest.raises(ValueError):
        coverage_plan(RECORDS[0], group_size=0, m=1, per_family=1, seed=0)
