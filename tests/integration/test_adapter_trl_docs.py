"""docs/adapters.md's TRL snippet, run as written, trains through the ratchet; certd going away
mid-run stops training with an error instead of training on nothing."""

from __future__ import annotations

import json
import re
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the train extra (torch) is installed by make")

from test_adapter_trl import OTHER, TASK, _tiny_model_and_tokenizer  # noqa: E402

from forkgate import ClientSettings  # noqa: E402
from forkgate.errors import TrainingStalledError  # noqa: E402
from forkgate.ratchet import Ratchet  # noqa: E402

# forkgate.adapters.trl and transformers are imported by the tests that use them, so that
# collecting this module does not import TRL (test_adapter_trl.py says why)
pytestmark = pytest.mark.skipif(
    find_spec("trl") is None, reason="the trl extra is installed by make (dev)"
)

ROOT = Path(__file__).resolve().parents[2]
DOC_ADDRESS = '"127.0.0.1:50051"'
DOC_ARGS = 'args = GRPOConfig(output_dir="grpo-out", num_generations=8)'
TINY_ARGS = (
    'args = GRPOConfig(output_dir="grpo-out", num_generations=8, per_device_train_batch_size=8,'
    " max_completion_length=8, max_steps=3, learning_rate=1e-2, beta=0.0, logging_steps=1,"
    ' report_to="none", use_cpu=True, save_strategy="no", seed=0, bf16=False)'
)
KAPPA = "countdown.first-op.v1"


def _doc_snippet() -> str:
    """The first python block of docs/adapters.md's TRL section."""
    text = (ROOT / "docs" / "adapters.md").read_text()
    section = text.split("## TRL", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def _dataset() -> Any:
    from datasets import Dataset

    rows = [
        {"prompt": "use 25 5 4 3 make 83: <answer>", "task": json.dumps(TASK)},
        {"prompt": "use 6 7 2 make 44: <answer>", "task": json.dumps(OTHER)},
    ]
    return Dataset.from_list(rows)


def _warm_start(model: Any, tokenizer: Any) -> None:
    """A few supervised steps toward one solution per prompt, so that sampled groups mix right
    and wrong answers: plain GRPO learns only from reward differences within a group, and a
    random model's rewards are all 0 (no gradient, which is not what this test is about)."""
    pairs = [
        ("use 25 5 4 3 make 83: <answer>", "(25-5)*4+3"),
        ("use 6 7 2 make 44: <answer>", "6*7+2"),
    ]
    rows = [tokenizer(p + a, add_special_tokens=False)["input_ids"] + [1] for p, a in pairs]
    starts = [len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p, _ in pairs]
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    for _ in range(25):  # partly trained: the samples still vary
        for ids, start in zip(rows, starts, strict=True):
            x = torch.tensor([ids])
            labels = x.clone()
            labels[0, :start] = -100
            loss = model(input_ids=x, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()


def _tiny_args(tmp_path: Path, steps: int) -> Any:
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(tmp_path / "out"), num_generations=4, per_device_train_batch_size=8,
        max_completion_length=8, max_steps=steps, learning_rate=1e-2, beta=0.0,
        logging_steps=1, report_to="none", use_cpu=True, save_strategy="no", seed=0, bf16=False,
    )  # fmt: skip


@pytest.mark.slow
def test_the_documented_trl_setup_trains_three_steps_through_the_ratchet(
    address: str, vkey: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snippet = _doc_snippet()
    # What a user changes: where their certd listens and their own GRPOConfig settings.
    assert snippet.count(DOC_ADDRESS) == 1 and snippet.count(DOC_ARGS) == 1
    script = snippet.replace(DOC_ADDRESS, repr(address)).replace(DOC_ARGS, TINY_ARGS)
    assert (tmp_path / "certd-data" / "signing.pub").read_text().strip() == vkey
    monkeypatch.chdir(tmp_path)  # the directory certd serves from, as the docs assume
    model, tokenizer = _tiny_model_and_tokenizer(tmp_path)
    _warm_start(model, tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    namespace: dict[str, Any] = {"model": model, "tokenizer": tokenizer, "dataset": _dataset()}
    exec(compile(script, "docs/adapters.md", "exec"), namespace)  # runs trainer.train()

    trainer = namespace["trainer"]
    assert trainer.state.global_step == 3
    steps = [h for h in trainer.state.log_history if "forkgate/refused_rollouts" in h]
    assert len(steps) == 3
    assert [h["forkgate/refused_rollouts"] for h in steps] == [0.0, 0.0, 0.0]
    assert [h["forkgate/unscored_rollouts"] for h in steps] == [0.0, 0.0, 0.0]
    # Plain GRPO (the default) learns from reward differences within a group: every step whose
    # group's rewards differ moved the model, and the warm start makes such steps happen.
    mixed = [h for h in steps if h["rewards/certd/std"] > 0]
    assert mixed and all(h["grad_norm"] > 0 for h in mixed), steps
    assert all(h["rewards/certd/mean"] == h["rewards/certd/mean"] for h in steps)  # not NaN
    assert trainer.guard.last is not None and trainer.guard.last.step == 3
    ratchet = trainer.ratchet
    assert ratchet.trusted is not None and ratchet.trusted.size >= 3  # followed the log
    after = list(trainer.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def _stop_certd_after_first_step(server: Any) -> Any:
    """A TRL callback that stops certd once the first step is done."""
    from transformers import TrainerCallback

    class StopCertdAfterFirstStep(TrainerCallback):  # type: ignore[misc]  # untyped base
        def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            if state.global_step == 1:
                server.stop(grace_s=0.5)

    return StopCertdAfterFirstStep()


@pytest.mark.slow
def test_training_stops_loudly_when_certd_goes_away(
    certd_server: Any, address: str, vkey: str, tmp_path: Path
) -> None:
    from forkgate.adapters.trl import CertdReward, StratifiedGRPOTrainer

    model, tokenizer = _tiny_model_and_tokenizer(tmp_path)
    quick = ClientSettings(timeout_s=2, max_retries=1, backoff_s=0.05)
    trainer = StratifiedGRPOTrainer(
        model=model, processing_class=tokenizer,
        reward_funcs=[CertdReward(address, trusted_keys=[vkey], settings=quick)],
        args=_tiny_args(tmp_path, steps=3), train_dataset=_dataset(),
        ratchet=Ratchet([vkey], kappas={KAPPA}),
        callbacks=[_stop_certd_after_first_step(certd_server)],
    )  # fmt: skip
    with pytest.raises(TrainingStalledError, match=r"8 of 8 rollouts left out.*8 unscored") as e:
        trainer.train()
    assert "certd is up and reachable" in str(e.value)
    assert trainer.state.global_step == 1  # step 1 trained; step 2 never ran on nothing
    assert trainer.guard.last is not None and trainer.guard.last.unscored == 8


def test_the_guard_counts_and_raises_on_fraction_and_streak() -> None:
    from forkgate.adapters.trl import LeftOutGuard
    from forkgate.ratchet import Admission, Reason

    guard = LeftOutGuard(max_left_out_fraction=0.5, max_refusing_steps=2)
    counts = guard.check(["CORRECT", "WRONG_ANSWER", "REFUSED", "INFRA_ERROR", "CORRECT"])
    assert (counts.total, counts.refused, counts.unscored) == (5, 1, 1)
    refusal = Admission(False, ((Reason.UNPROVEN_CHECKPOINT, "no proof 36 → 37"),))
    with pytest.raises(TrainingStalledError, match=r"2 consecutive.*UNPROVEN_CHECKPOINT"):
        guard.check(["REFUSED", "CORRECT", "CORRECT"], [refusal])
    with pytest.raises(TrainingStalledError, match="2 of 4 rollouts left out"):
        LeftOutGuard(max_left_out_fraction=0.5).check(["INFRA_ERROR"] * 2 + ["CORRECT"] * 2)
    off = LeftOutGuard(max_left_out_fraction=None, max_refusing_steps=0)
    assert off.check(["REFUSED"] * 3).left_out == 3
    with pytest.raises(ValueError, match="max_left_out_fraction"):
        LeftOutGuard(max_left_out_fraction=0.0)


def test_unknown_trainer_keywords_are_a_type_error(dead_address: str, tmp_path: Path) -> None:
    from forkgate.adapters.trl import CertdReward, StratifiedGRPOTrainer

    model, tokenizer = _tiny_model_and_tokenizer(tmp_path)
    with pytest.raises(TypeError):
        StratifiedGRPOTrainer(
            model=model, processing_class=tokenizer,
            reward_funcs=[CertdReward(dead_address)],
            args=_tiny_args(tmp_path, steps=1), train_dataset=_dataset(),
            ratchett=None,
        )  # fmt: skip


def test_the_default_trainer_overrides_no_private_trl_method(
    dead_address: str, tmp_path: Path
) -> None:
    """The documented setup uses TRL's public API only: no GRPOTrainer internal is replaced,
    on the class or on the instance; the opt-in estimators wrap two, checked by name."""
    from trl.trainer.grpo_trainer import GRPOTrainer

    from forkgate.adapters.trl import CertdReward, StratifiedGRPOTrainer

    private = {n for n in dir(GRPOTrainer) if n.startswith("_") and not n.startswith("__")}
    assert private.isdisjoint(vars(StratifiedGRPOTrainer))
    model, tokenizer = _tiny_model_and_tokenizer(tmp_path)
    trainer = StratifiedGRPOTrainer(
        model=model, processing_class=tokenizer,
        reward_funcs=[CertdReward(dead_address)],
        args=_tiny_args(tmp_path, steps=1), train_dataset=_dataset(),
    )  # fmt: skip
    assert private.isdisjoint(vars(trainer))


def test_another_trl_fails_the_opt_in_estimators_by_name() -> None:
    from trl.trainer.grpo_trainer import GRPOTrainer

    from forkgate.adapters.trl import TESTED_TRL, check_trl
    from forkgate.errors import SetupError

    check_trl()  # the installed TRL is the tested one

    class Renamed(GRPOTrainer):  # a future TRL: another signature
        def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any) -> Any:
            return None

    with pytest.raises(SetupError, match=f"tested with trl=={TESTED_TRL}.*_calculate_rewards"):
        check_trl(Renamed)
