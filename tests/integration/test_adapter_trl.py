"""The TRL adapter against the real TRL: certd rewards, stratified GRPO, one real CPU step."""

from __future__ import annotations

import asyncio
import json
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

torch = pytest.importorskip("torch", reason="the train extra (torch) is installed by make")

from certd.signing.keys import SigningKey  # noqa: E402
from certd.statements import task_digest  # noqa: E402
from forkgate import ClientSettings  # noqa: E402
from forkgate.adapters._scoring import Scored  # noqa: E402
from forkgate.advantages import (  # noqa: E402
    StratifiedAdvantages,
    grpo_advantages,
    informed_stratified_advantages,
)
from forkgate.errors import TrainingStalledError  # noqa: E402
from forkgate.metrics import EntropyMonitor, default_monitor  # noqa: E402
from forkgate.ratchet import Ratchet, Reason  # noqa: E402
from forkgate.tasks import make_task  # noqa: E402

if TYPE_CHECKING:
    from forkgate.adapters.trl import StratifiedGRPOTrainer

# TRL (with transformers, datasets, peft …) takes ~7 CPU-s to import: each test imports
# forkgate.adapters.trl, so collecting this module (every xdist worker does) does not.
pytestmark = pytest.mark.skipif(
    find_spec("trl") is None, reason="the trl extra is installed by make (dev)"
)

TASK = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}
OTHER = {"domain": "countdown", "numbers": [6, 7, 2], "target": 44}
KAPPA = "countdown.first-op.v1"


def test_certd_reward_scores_families_and_sets_none_on_outage(
    dead_address: str, address: str, vkey: str
) -> None:
    from forkgate.adapters.trl import CertdReward

    reward = CertdReward(address, trusted_keys=[vkey])
    completions = [
        "<answer>(25-5)*4+3</answer>",  # correct, family 25,-
        "<answer>4*25-5*3-2</answer>",  # breaks the rules
        "<answer>(4*25)-(5*3)-2</answer>",
        "<answer>6*7+2</answer>",  # correct on the other task
        "no answer at all",
    ]
    tasks = [TASK, TASK, json.dumps(TASK), json.dumps(OTHER), TASK]
    got = asyncio.run(reward(prompts=["p"] * 5, completions=completions, task=tasks))
    assert got[0] == 1.0 and got[3] == 1.0
    assert got[1] == got[2] == got[4] == 0.0
    assert reward.last[0].family == "25,-" and reward.last[0].status == "CORRECT"
    assert reward.last[3].question == task_digest(make_task("countdown", OTHER))
    assert reward.last[0].question == reward.last[2].question != reward.last[3].question
    # Conversational completions: the last message is the answer.
    conv = asyncio.run(
        reward(
            prompts=["p"],
            completions=[[{"role": "assistant", "content": completions[0]}]],
            task=[TASK],
        )
    )
    assert conv == [1.0]

    down = CertdReward(
        dead_address,
        trusted_keys=[vkey],
        settings=ClientSettings(timeout_s=2, max_retries=1, backoff_s=0.05),
    )
    assert asyncio.run(down(prompts=["p", "p"], completions=completions[:2], task=[TASK] * 2)) == [
        None,
        None,
    ]
    assert [s.status for s in down.last] == ["INFRA_ERROR", "INFRA_ERROR"]
    with pytest.raises(KeyError, match="task"):
        asyncio.run(reward(prompts=["p"], completions=["x"]))


def _tiny_model_and_tokenizer(tmp_path: Path) -> tuple[Any, Any]:
    """A character tokenizer saved to a temp dir and a one-layer GPT-2: no download."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[EOS]": 1, "[UNK]": 2}
    for ch in "0123456789+-*/()<>= answerthikmuseo:":
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", eos_token="[EOS]", unk_token="[UNK]"
    ).save_pretrained(tmp_path / "tok")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tok")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(vocab),
            n_positions=96,
            n_embd=16,
            n_layer=1,
            n_head=2,
            eos_token_id=1,
            pad_token_id=0,
            bos_token_id=1,
        )
    )
    return model, tokenizer


def _trainer(
    address: str,
    vkey: str,
    tmp_path: Path,
    ratchet: Ratchet | None,
    settings: ClientSettings | None = None,
    **extra: Any,
) -> StratifiedGRPOTrainer:
    from datasets import Dataset
    from trl import GRPOConfig

    from forkgate.adapters.trl import CertdReward, StratifiedGRPOTrainer

    model, tokenizer = _tiny_model_and_tokenizer(tmp_path)
    rows = [
        {"prompt": "use 25 5 4 3 make 83: <answer>", "task": json.dumps(TASK)},
        {"prompt": "use 6 7 2 make 44: <answer>", "task": json.dumps(OTHER)},
    ]
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=8,
        max_steps=1,
        learning_rate=1e-2,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        seed=0,
        bf16=False,
    )
    return StratifiedGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[CertdReward(address, trusted_keys=[vkey], settings=settings)],
        args=args,
        train_dataset=Dataset.from_list(rows),
        stratified=StratifiedAdvantages(scale="none"),
        ratchet=ratchet,
        **extra,
    )


def _train_one_step(trainer: StratifiedGRPOTrainer) -> tuple[list[Any], bool]:
    """One real step; the advantages the loss received, and whether the weights moved."""
    seen: list[Any] = []
    inner = trainer._generate_and_score_completions

    def spy(inputs: Any) -> Any:
        out = inner(inputs)
        seen.append(out["advantages"].clone())
        return out

    trainer._generate_and_score_completions = spy  # observe what the loss receives
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    assert trainer.state.global_step == 1
    after = list(trainer.model.parameters())
    return seen, any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.slow
def test_stratified_grpo_trainer_runs_one_real_step(
    address: str, vkey: str, tmp_path: Path
) -> None:
    ratchet = Ratchet([vkey], kappas={KAPPA})
    trainer = _trainer(address, vkey, tmp_path, ratchet)
    seen, moved = _train_one_step(trainer)

    assert len(seen) >= 1 and len(trainer._scored) == 8
    assert trainer.refused == [] and ratchet.trusted is not None  # every group admitted
    # The advantages the loss used are the stratified ones of the batch certd scored.
    scored = trainer._scored
    rewards = torch.tensor([s.reward for s in scored], dtype=torch.float32)
    expected = StratifiedAdvantages(scale="none")(
        rewards, [s.question for s in scored], [s.family or "" for s in scored]
    )
    assert torch.allclose(seen[0], expected)
    # A random tiny model rarely solves Countdown, so plain GRPO would see equal rewards and
    # zero advantages; the family prior still gives a signal, and the step moved the weights.
    assert expected.abs().sum() > 0
    assert moved


@pytest.mark.slow
def test_a_ratchet_that_refuses_every_group_leaves_the_batch_out(
    address: str, vkey: str, tmp_path: Path
) -> None:
    from forkgate.adapters.trl import LeftOutGuard

    alien = SigningKey.generate("alien").verifier()
    ratchet = Ratchet([alien], kappas={KAPPA})  # trusts another log: every receipt is unknown
    with pytest.raises(TrainingStalledError, match=r"8 refused by the ratchet.*UNKNOWN_KEY"):
        _trainer(address, vkey, tmp_path, ratchet).train()  # the default guard: loud
    off = LeftOutGuard(max_left_out_fraction=None, max_refusing_steps=0)
    trainer = _trainer(address, vkey, tmp_path, Ratchet([alien], kappas={KAPPA}), guard=off)
    seen, moved = _train_one_step(trainer)
    assert trainer.refused and all(not a.admitted for a in trainer.refused)
    assert {r for a in trainer.refused for r, _ in a.reasons} == {Reason.UNKNOWN_KEY}
    assert {s.status for s in trainer._scored} == {"REFUSED"}
    assert torch.count_nonzero(seen[0]) == 0
    assert not moved


@pytest.mark.slow
def test_with_the_guard_off_a_step_during_a_certd_outage_learns_nothing(
    dead_address: str, vkey: str, tmp_path: Path
) -> None:
    from forkgate.adapters.trl import LeftOutGuard

    quick = ClientSettings(timeout_s=2, max_retries=1, backoff_s=0.05)
    off = LeftOutGuard(max_left_out_fraction=None)  # the default raises: test_adapter_trl_docs
    down = dead_address
    trainer = _trainer(down, vkey, tmp_path, None, settings=quick, guard=off)
    seen, moved = _train_one_step(trainer)
    assert {s.status for s in trainer._scored} == {"INFRA_ERROR"}
    assert {s.reward for s in trainer._scored} == {None}  # TRL got None for every row
    assert torch.count_nonzero(seen[0]) == 0
    assert not moved


def test_stratified_advantages_leave_out_rows_with_no_reward() -> None:
    from forkgate.adapters.trl import StratifiedGRPOTrainer

    t = StratifiedGRPOTrainer.__new__(StratifiedGRPOTrainer)  # only the maths, no model
    t.stratified = StratifiedAdvantages(scale="none")
    t.informed = False
    t.reward_weights = torch.ones(1)
    nan = float("nan")
    per_func = torch.tensor([[1.0], [0.0], [nan], [1.0]])
    scored = [
        Scored(1.0, "25,-", "CORRECT", "q"),
        Scored(0.0, "25,-", "WRONG_ANSWER", "q"),
        Scored(None, None, "INFRA_ERROR", "q"),
        Scored(1.0, "4,*", "CORRECT", "q"),
    ]
    adv = t.stratified_advantages(per_func, scored)
    assert adv.tolist() == pytest.approx([0.75, -0.75, 0.0, 0.5])
    # The infra row never entered the prior: one (q, 25,-) batch of two and one (q, 4,*).
    assert t.stratified.window.prior(t.stratified.group_ids(["q"], ["25,-"])).item() == (
        pytest.approx((1 + 1) / (2 + 2))
    )
    with pytest.raises(ValueError, match="verdicts"):
        t.stratified_advantages(per_func, scored[:3])


def test_the_default_advantages_are_plain_grpo_with_the_monitor_on() -> None:
    """Coverage protections are opt-in (docs/adapters.md); the default is GRPO per question."""
    import inspect

    from forkgate.adapters.trl import StratifiedGRPOTrainer

    params = inspect.signature(StratifiedGRPOTrainer.__init__).parameters
    assert params["stratified"].default is None and params["informed"].default is False
    assert params["entropy_monitor"].default is True
    assert isinstance(default_monitor(True), EntropyMonitor) and default_monitor(False) is None
    t = StratifiedGRPOTrainer.__new__(StratifiedGRPOTrainer)  # only the maths, no model
    t.stratified, t.informed, t.reward_weights = None, False, torch.ones(1)
    per_func = torch.tensor([[1.0], [0.0], [float("nan")], [1.0]])
    scored = [
        Scored(1.0, "25,-", "CORRECT", "q"),
        Scored(0.0, "4,*", "WRONG_ANSWER", "q"),
        Scored(None, None, "INFRA_ERROR", "q"),
        Scored(1.0, "4,*", "CORRECT", "r"),
    ]
    want = [*grpo_advantages([1.0, 0.0], ["q", "q"]), 0.0, 0.0]
    assert t.stratified_advantages(per_func, scored).tolist() == pytest.approx(want)


@pytest.mark.slow
def test_entry_protection_options_reach_a_real_step(
    address: str, vkey: str, tmp_path: Path
) -> None:
    monitor = EntropyMonitor(floor=100.0)  # any entropy is below it: every batch alarms
    trainer = _trainer(
        address, vkey, tmp_path, None, informed=True, entry_unscored=lambda ids: 2,
        entropy_monitor=monitor,
    )  # fmt: skip
    masks: list[Any] = []
    inner = trainer._generate_and_score_completions

    def spy(inputs: Any) -> Any:
        out = inner(inputs)
        masks.append(out["completion_mask"].clone())
        return out

    trainer._generate_and_score_completions = spy
    trainer.train()
    assert masks and int(masks[0][:, :2].sum()) == 0  # the loss never sees the entry tokens
    assert trainer.informed and monitor.alarms  # the monitor watched the training batch
    assert any("forkgate/entry_entropy" in h for h in trainer.state.log_history)


def test_informed_advantages_and_the_monitor_in_the_trainer_maths() -> None:
    from forkgate.adapters.trl import StratifiedGRPOTrainer

    t = StratifiedGRPOTrainer.__new__(StratifiedGRPOTrainer)  # only the maths, no model
    t.stratified = StratifiedAdvantages(scale="none")
    t.reward_weights = torch.ones(1)
    t.informed = True
    t.entropy_monitor = EntropyMonitor(max_drop=0.1)
    t._batches = 0
    nan = float("nan")
    per_func = torch.tensor([[1.0], [0.0], [nan], [0.0]])
    scored = [
        Scored(1.0, "25,-", "CORRECT", "q"),
        Scored(0.0, "25,-", "WRONG_ANSWER", "q"),
        Scored(None, None, "INFRA_ERROR", "q"),
        Scored(0.0, "4,*", "WRONG_ANSWER", "q"),
    ]
    adv = t.stratified_advantages(per_func, scored)
    total, _ = informed_stratified_advantages([1.0, 0.0, 0.0], ["q"] * 3, ["25,-", "25,-", "4,*"])
    expected = torch.tensor(total)
    expected = expected / (expected.std(unbiased=False) + 1e-6)
    assert adv[[0, 1, 3]].tolist() == pytest.approx(expected.tolist(), rel=1e-5)
    assert adv[2] == 0.0
    h1 = t.observe_entries(scored)  # two families among the three answered rows
    assert h1 is not None and h1 > 0
    assert t.observe_entries([Scored(1.0, "25,-", "CORRECT", "q")]) == 0.0
    assert t.entropy_monitor.alarms and t.entropy_monitor.alarms[0].step == 2


def test_unscore_completion_entries_clears_each_rows_entry() -> None:
    from forkgate.adapters.trl import unscore_completion_entries

    out = {
        "completion_ids": torch.tensor([[5, 6, 7], [8, 9, 0]]),
        "completion_mask": torch.ones(2, 3),
    }
    unscore_completion_entries(out, lambda ids: 1 if ids[0] == 5 else -3)
    assert out["completion_mask"].tolist() == [[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]]


def _entries(task: Any) -> list[str]:
    """The test prompts' completions open with the answer: each number's first operation."""
    numbers = json.loads(task)["numbers"] if isinstance(task, str) else task["numbers"]
    return [f"{n}{op}" for n in numbers for op in "+-*"]


@pytest.mark.slow
def test_the_entry_kl_enters_trls_loss_in_real_steps(
    address: str, vkey: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="entry_candidates"):
        _trainer(address, vkey, tmp_path, None, entry_kl=1.0)
    trainer = _trainer(
        address, vkey, tmp_path, None, entry_kl=1.0, entry_candidates=_entries
    )  # fmt: skip
    trainer.args.max_steps = 2
    for m in trainer.model.modules():  # GRPOConfig(disable_dropout=True) does this in real use
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    before = {k: v.clone() for k, v in trainer._entry_ref.state_dict().items()}
    trainer.train()
    kls = [h["forkgate/entry_kl"] for h in trainer.state.log_history if "forkgate/entry_kl" in h]
    assert len(kls) == 2
    assert kls[0] == pytest.approx(0.0, abs=1e-6)  # the first loss: model == starting policy
    assert kls[1] > 0  # after one update the entry distribution has moved from the start
    # the reference is the starting policy, frozen
    assert all(torch.equal(v, trainer._entry_ref.state_dict()[k]) for k, v in before.items())
    # each prompt's feasible entries: 4 numbers x 3 operators, and 3 x 3
    assert sorted(len(c) for c, _ in trainer._entries.values()) == [9, 12]
