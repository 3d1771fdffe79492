"""The verl adapter against the real verl: compute_score through verl's reward manager, the
stratified estimator through verl's own ``compute_advantage`` on a real ``DataProto``."""

from __future__ import annotations

import asyncio
import copy
import json
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the train extra (torch) is installed by make")

from certd.signing.keys import SigningKey  # noqa: E402
from certd.statements import task_digest  # noqa: E402
from forkgate import CertdClient  # noqa: E402
from forkgate.advantages import (  # noqa: E402
    StratifiedAdvantages,
    grpo_advantages,
    informed_stratified_advantages,
)
from forkgate.errors import TrainingStalledError  # noqa: E402
from forkgate.metrics import EntropyMonitor  # noqa: E402
from forkgate.ratchet import Ratchet, Reason  # noqa: E402
from forkgate.tasks import make_task  # noqa: E402

if TYPE_CHECKING:
    from verl import DataProto

# verl (with ray) takes ~6 CPU-s to import: the tests import it and forkgate.adapters.verl,
# so collecting this module (every xdist worker does) does not
pytestmark = pytest.mark.skipif(
    find_spec("verl") is None, reason="make installs verl (--no-deps) with the verl extra"
)

TASK = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}


def _char_tokenizer(tmp_path: Path) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[EOS]": 1, "[UNK]": 2}
    for ch in "0123456789+-*/()<>= answerthikmuseo:":
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", eos_token="[EOS]", unk_token="[UNK]"
    )


def _score_with_verl(
    address: str,
    vkeys: list[str],
    tmp_path: Path,
    responses: list[str],
    together: bool = False,
    **reward_kwargs: Any,
) -> list[dict[str, Any]]:
    """Score responses the way verl's trainer does: custom_reward_function + NaiveRewardManager."""
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://forkgate.adapters.verl",
                    "name": "compute_score",
                    "reward_kwargs": {
                        "certd_address": address,
                        "trusted_keys": vkeys,
                        **reward_kwargs,
                    },
                }
            }
        }
    )
    tokenizer = _char_tokenizer(tmp_path)
    manager = NaiveRewardManager(config, tokenizer, get_custom_reward_fn(config))
    prompt = tokenizer("use 25 5 4 3:", return_tensors="pt")["input_ids"][0]
    rows = []
    for text in responses:
        ids = tokenizer(text, return_tensors="pt")["input_ids"][0]
        rows.append(
            DataProto.from_dict(
                tensors={
                    "prompts": prompt[None],
                    "responses": ids[None],
                    "attention_mask": torch.ones(1, len(prompt) + len(ids), dtype=torch.long),
                },
                non_tensors={
                    "data_source": np.array(["countdown"], dtype=object),
                    "reward_model": np.array([{"ground_truth": json.dumps(TASK)}], dtype=object),
                },
            )
        )
    if together:  # as verl's reward loop does: every row of the batch at once

        async def all_rows() -> list[dict[str, Any]]:
            return list(await asyncio.gather(*(manager.run_single(row) for row in rows)))

        return manager.loop.run_until_complete(all_rows())
    return [manager.loop.run_until_complete(manager.run_single(row)) for row in rows]


def test_compute_score_through_verls_reward_manager(
    dead_address: str, address: str, vkey: str, tmp_path: Path
) -> None:
    from forkgate.adapters import verl as fg

    results = _score_with_verl(
        address,
        [vkey],
        tmp_path,
        ["<answer>(25-5)*4+3</answer>", "<answer>25+5+4+3</answer>", "hi"],
    )
    first, wrong, junk = (r["reward_extra_info"] for r in results)
    assert results[0]["reward_score"] == 1.0 and first["acc"] is True
    assert first[fg.FAMILY_KEY] == "25,-" and first[fg.STATUS_KEY] == "CORRECT"
    assert first[fg.QUESTION_KEY] == task_digest(make_task("countdown", TASK))
    assert results[1]["reward_score"] < 1.0 and wrong[fg.STATUS_KEY] == "WRONG_ANSWER"
    assert wrong[fg.FAMILY_KEY] == "25,+"
    assert results[2]["reward_score"] < 1.0 and junk[fg.STATUS_KEY] != "CORRECT"

    # Rows scored together share one VerifyBatch: one receipt, one ledger entry.
    with CertdClient(address) as c:
        size = c.checkpoint().size
        together = _score_with_verl(
            address, [vkey], tmp_path, ["<answer>(25-5)*4+3</answer>"] * 6, together=True
        )
        assert [r["reward_score"] for r in together] == [1.0] * 6
        assert c.checkpoint().size == size + 1
        _score_with_verl(address, [vkey], tmp_path, ["<answer>1</answer>"] * 2)
        assert c.checkpoint().size == size + 3  # one by one: one receipt each

    down = _score_with_verl(dead_address, [vkey], tmp_path, ["<answer>1</answer>"])
    assert down[0]["reward_score"] == 0.0
    assert down[0]["reward_extra_info"][fg.STATUS_KEY] == "INFRA_ERROR"


def _batch(rows: list[tuple[str, str, str, float]], length: int = 5) -> DataProto:
    """A DataProto as verl's trainer holds it after scoring: outcome reward on the last token."""
    from verl import DataProto

    from forkgate.adapters import verl as fg

    n = len(rows)
    lengths = torch.tensor([2 + i % 3 for i in range(n)])
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(torch.float32)
    rewards = torch.zeros(n, length)
    rewards[torch.arange(n), lengths - 1] = torch.tensor([r[3] for r in rows])
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask},
        non_tensors={
            "uid": np.array([f"prompt-{r[0]}" for r in rows], dtype=object),
            fg.QUESTION_KEY: np.array([r[0] for r in rows], dtype=object),
            fg.FAMILY_KEY: np.array([r[1] for r in rows], dtype=object),
            fg.STATUS_KEY: np.array([r[2] for r in rows], dtype=object),
        },
    )


def test_registered_estimator_through_verls_compute_advantage() -> None:
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from forkgate.adapters import verl as fg

    assert get_adv_estimator_fn(fg.ESTIMATOR_NAME) is fg.DEFAULT_ESTIMATOR
    est = fg.StratifiedEstimator(stratified=True, scale="none").register("forkgate_stratified_test")
    reference = StratifiedAdvantages(scale="none")
    batches = [
        [
            ("q1", "25,-", "CORRECT", 1.0),
            ("q1", "25,-", "WRONG_ANSWER", 0.0),
            ("q1", "4,*", "CORRECT", 1.0),
            ("q1", "", "INFRA_ERROR", 0.0),
            ("q2", "6,*", "CORRECT", 1.0),
            ("q2", "6,*", "CORRECT", 1.0),
        ],
        [
            ("q1", "25,-", "CORRECT", 1.0),
            ("q1", "4,*", "WRONG_ANSWER", 0.0),
            ("q2", "7,+", "CORRECT", 1.0),
            ("q2", "6,*", "WRONG_ANSWER", 0.0),
        ],
    ]
    for rows in batches:
        data = _batch(rows)
        original_uid = data.non_tensor_batch["uid"].copy()
        fg.stratify_uids(data)
        data = compute_advantage(data, adv_estimator="forkgate_stratified_test")
        fg.restore_uids(data)
        assert list(data.non_tensor_batch["uid"]) == list(original_uid)
        kept = [i for i, r in enumerate(rows) if r[2] != "INFRA_ERROR"]
        expected = torch.zeros(len(rows))
        expected[kept] = reference(
            torch.tensor([rows[i][3] for i in kept]),
            [rows[i][0] for i in kept],
            [rows[i][1] for i in kept],
        )
        mask = data.batch["response_mask"]
        adv = data.batch["advantages"]
        assert torch.allclose(adv, expected[:, None] * mask)  # spread over response tokens
        assert torch.equal(data.batch["returns"], adv)
    # First batch, q1: the lone (4,*) success is judged against its prior ½, not the others.
    assert est.advantages.window.prior(est.advantages.group_ids(["q1"], ["4,*"])).item() == (
        pytest.approx((1 + 0 + 1) / (2 + 2))
    )


def test_estimator_refuses_a_batch_without_family_labels() -> None:
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from forkgate.adapters import verl as fg

    data = _batch([("q1", "25,-", "CORRECT", 1.0), ("q1", "4,*", "CORRECT", 1.0)])
    with pytest.raises(ValueError, match="stratify_uids"):
        compute_advantage(data, adv_estimator=fg.ESTIMATOR_NAME)
    del data.non_tensor_batch[fg.FAMILY_KEY]
    with pytest.raises(KeyError, match="forkgate_family"):
        fg.stratify_uids(data)


def test_estimator_reads_labels_from_non_tensor_batch_when_given() -> None:
    from forkgate.adapters import verl as fg

    est = fg.StratifiedEstimator(stratified=True, scale="none")
    data = _batch([("q1", "25,-", "CORRECT", 1.0), ("q1", "4,*", "WRONG_ANSWER", 0.0)])
    adv, _ = est(
        data.batch["token_level_rewards"],
        data.batch["response_mask"],
        index=data.non_tensor_batch["uid"],
        non_tensor_batch=data.non_tensor_batch,
    )
    assert adv[:, 0].tolist() == pytest.approx([0.5, -0.5])  # every row masks token 0 in


def test_the_default_estimator_is_plain_grpo_with_the_monitor_on() -> None:
    """Coverage protections are opt-in (docs/adapters.md); the default is GRPO per question."""
    from forkgate.adapters import verl as fg

    est = fg.StratifiedEstimator()
    assert not est.stratified and not est.informed and not est.entry_unscored
    assert isinstance(est.entropy_monitor, EntropyMonitor)
    assert fg.StratifiedEstimator(entropy_monitor=False).entropy_monitor is None
    assert not fg.DEFAULT_ESTIMATOR.stratified
    rows = [("q1", "25,-", "CORRECT", 1.0), ("q1", "4,*", "WRONG_ANSWER", 0.0)]
    rows += [("q1", "", "INFRA_ERROR", 0.0), ("q2", "6,*", "CORRECT", 1.0)]
    data = _batch(rows)
    adv, _ = est(
        data.batch["token_level_rewards"],
        data.batch["response_mask"],
        index=data.non_tensor_batch["uid"],
        non_tensor_batch=data.non_tensor_batch,
    )
    want = [*grpo_advantages([1.0, 0.0], ["q1", "q1"]), 0.0, 0.0]
    assert adv[:, 0].tolist() == pytest.approx(want)


def test_admit_batch_leaves_refused_groups_out(address: str, vkey: str, tmp_path: Path) -> None:
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from forkgate.adapters import verl as fg

    responses = [
        "<answer>(25-5)*4+3</answer>",
        "<answer>25-5+4+3</answer>",
        "<answer>4*(25-5)+3</answer>",
        "<answer>(25-5)*4-3</answer>",
    ]
    scored = _score_with_verl(
        address, [vkey], tmp_path, responses, together=True, certd_keep_rollouts=True
    )
    infos = [r["reward_extra_info"] for r in scored]
    columns = {k: np.array([i[k] for i in infos]) for k in infos[0]}  # as verl's trainer does

    def batch() -> DataProto:
        data = _batch(
            [
                (str(i[fg.QUESTION_KEY]), str(i[fg.FAMILY_KEY]), str(i[fg.STATUS_KEY]), r)
                for i, r in zip(infos, [s["reward_score"] for s in scored], strict=True)
            ]
        )
        data.non_tensor_batch.update(copy.deepcopy(columns))
        return data

    good = batch()
    assert fg.admit_batch(good, Ratchet([vkey], kappas={"countdown.first-op.v1"})) == []
    assert "REFUSED" not in set(good.non_tensor_batch[fg.STATUS_KEY])

    alien = SigningKey.generate("alien").verifier()
    bad = batch()
    with pytest.raises(TrainingStalledError, match=r"4 refused by the ratchet.*UNKNOWN_KEY"):
        fg.admit_batch(batch(), Ratchet([alien], kappas={"countdown.first-op.v1"}))
    off = fg.LeftOutGuard(max_left_out_fraction=None)
    refusals = fg.admit_batch(bad, Ratchet([alien], kappas={"countdown.first-op.v1"}), guard=off)
    assert len(refusals) == 2  # the 25,- group and the 4,* group
    assert {r for a in refusals for r, _ in a.reasons} == {Reason.UNKNOWN_KEY}
    assert set(bad.non_tensor_batch[fg.STATUS_KEY]) == {"REFUSED"}
    fg.stratify_uids(bad)
    bad = compute_advantage(bad, adv_estimator=fg.ESTIMATOR_NAME)
    assert torch.count_nonzero(bad.batch["advantages"]) == 0

    without = _batch([("q1", "25,-", "CORRECT", 1.0)])
    with pytest.raises(KeyError, match="certd_keep_rollouts"):
        fg.admit_batch(without, Ratchet([vkey], kappas={"countdown.first-op.v1"}))


def test_entry_protection_options_through_verls_compute_advantage() -> None:
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from forkgate.adapters import verl as fg

    monitor = EntropyMonitor(floor=5.0)
    est = fg.StratifiedEstimator(informed=True, entry_unscored=True, entropy_monitor=monitor)
    est.register("forkgate_protected_test")
    rows = [
        ("q1", "25,-", "CORRECT", 1.0),
        ("q1", "25,-", "WRONG_ANSWER", 0.0),
        ("q1", "4,*", "WRONG_ANSWER", 0.0),
        ("q1", "", "INFRA_ERROR", 0.0),
    ]
    data = _batch(rows)
    data.batch["responses"] = torch.tensor([[7, 7, 1, 1, 1], [3, 1, 1, 1, 1]] * 2)
    fg.mark_entry_tokens(data, lambda ids: 2 if ids[0] == 7 else 1)
    fg.stratify_uids(data)
    data = compute_advantage(data, adv_estimator="forkgate_protected_test")
    adv = data.batch["advantages"]
    total, _ = informed_stratified_advantages([1.0, 0.0, 0.0], ["q1"] * 3, ["25,-", "25,-", "4,*"])
    seq = torch.tensor(total)
    seq = seq / (seq.std(unbiased=False) + 1e-6)
    mask = data.batch["response_mask"].clone()
    mask[0, :2] = 0
    mask[1, :1] = 0
    mask[2, :2] = 0
    expected = torch.zeros(4, mask.shape[1])
    expected[:3] = seq[:, None].float() * mask[:3]
    assert torch.allclose(adv, expected, atol=1e-6)
    assert monitor.alarms and est.batches == 1  # the monitor saw the batch's entries
    with pytest.raises(KeyError):
        fg.mark_entry_tokens(DataProto.from_dict(tensors={"x": torch.zeros(1, 1)}), len)


def test_a_misspelt_reward_kwarg_is_a_type_error(address: str, vkey: str, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="certd_adress"):
        _score_with_verl(address, [vkey], tmp_path, ["<answer>1</answer>"], certd_adress=address)


def _scored_batch(address: str, vkey: str, tmp_path: Path, responses: list[str]) -> DataProto:
    """A batch as verl's trainer holds it after its reward loop, rollouts kept."""
    from forkgate.adapters import verl as fg

    scored = _score_with_verl(
        address, [vkey], tmp_path, responses, together=True, certd_keep_rollouts=True
    )
    infos = [r["reward_extra_info"] for r in scored]
    data = _batch(
        [
            (
                str(i[fg.QUESTION_KEY]),
                str(i[fg.FAMILY_KEY]),
                str(i[fg.STATUS_KEY]),
                s["reward_score"],
            )
            for i, s in zip(infos, scored, strict=True)
        ]
    )
    data.non_tensor_batch.update({k: np.array([i[k] for i in infos]) for k in infos[0]})
    return data


def test_admit_batch_follows_the_log_across_steps_and_stops_loudly(
    certd_server: Any, address: str, vkey: str, tmp_path: Path
) -> None:
    from forkgate.adapters import verl as fg

    ratchet = Ratchet([vkey], kappas={"countdown.first-op.v1"})  # as documented: no consistency=
    guard = fg.LeftOutGuard()
    responses = ["<answer>(25-5)*4+3</answer>", "<answer>25-5+4+3</answer>"]
    for step in range(3):  # each step's receipt is a new ledger entry: the ratchet needs a proof
        batch = _scored_batch(address, vkey, tmp_path, responses)
        assert fg.admit_batch(batch, ratchet, guard=guard, certd_address=address) == []
        assert guard.last is not None and guard.last.left_out == 0 and guard.last.step == step + 1
    assert ratchet.trusted is not None and ratchet.trusted.size >= 3

    certd_server.stop(grace_s=0.5)  # certd goes away: every row INFRA_ERROR, no rollout kept
    down = _scored_batch(address, vkey, tmp_path, responses)
    with pytest.raises(TrainingStalledError, match=r"2 of 2 rollouts left out.*2 unscored"):
        fg.admit_batch(down, ratchet, guard=guard, certd_address=address)
