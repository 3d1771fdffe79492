"""The verl driver (forkgate.adapters.verl_main): its hooks around verl's own
``compute_advantage``, and their places in verl's own ``RayPPOTrainer.fit``."""

from __future__ import annotations

import inspect
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the train extra (torch) is installed by make")

from test_adapter_verl import _scored_batch  # noqa: E402

from certd.signing.keys import SigningKey  # noqa: E402
from forkgate.errors import TrainingStalledError  # noqa: E402

# verl and the adapters are imported by the tests (test_adapter_verl.py says why)
pytestmark = pytest.mark.skipif(
    find_spec("verl") is None, reason="make installs verl (--no-deps) with the verl extra"
)

KAPPA = "countdown.first-op.v1"
RESPONSES = [
    "<answer>(25-5)*4+3</answer>",
    "<answer>25-5+4+3</answer>",
    "<answer>4*(25-5)+3</answer>",
    "<answer>(25-5)*4-3</answer>",
]


def _config(address: str, **forkgate: Any) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "reward": {"custom_reward_function": {"reward_kwargs": {"certd_address": address}}},
            "forkgate": forkgate,
        }
    )


def test_the_hooks_sit_where_verls_fit_computes_advantages() -> None:
    """ForkgatePPOTrainer overrides methods verl's fit() calls in this order."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from forkgate.adapters.verl_main import ForkgatePPOTrainer

    fit = inspect.getsource(RayPPOTrainer.fit)
    places = [
        fit.index("extract_reward(batch)"),  # the forkgate_* columns are in the batch
        fit.index("self._compute_old_log_prob(batch)"),  # before_advantage
        fit.index("batch = compute_advantage("),
        fit.index("self._update_critic(batch)"),  # after_advantage
        fit.index("self._update_actor(batch)"),  # after_advantage
    ]
    assert places == sorted(places)
    for name in ("_compute_old_log_prob", "_update_critic", "_update_actor"):
        assert name in vars(ForkgatePPOTrainer) and callable(getattr(RayPPOTrainer, name))


def test_the_hook_sequence_with_verls_compute_advantage_over_several_steps(
    address: str, vkey: str, tmp_path: Path
) -> None:
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from forkgate.adapters import verl as fg
    from forkgate.adapters.verl_main import ForkgateHooks

    hooks = ForkgateHooks.from_config(_config(address, kappas=[KAPPA], trusted_keys=[vkey]))
    assert hooks.ratchet is not None and hooks.certd_address == address
    for step in range(1, 4):  # the ratchet follows the log: no refusal at step 2 or 3
        batch = _scored_batch(address, vkey, tmp_path, RESPONSES)
        uids = list(batch.non_tensor_batch["uid"])
        counts = hooks.before_advantage(batch)
        assert (counts.step, counts.refused, counts.unscored) == (step, 0, 0)
        assert hooks.refused == []
        batch = compute_advantage(batch, adv_estimator=fg.ESTIMATOR_NAME)  # verl's own
        hooks.after_advantage(batch)
        assert list(batch.non_tensor_batch["uid"]) == uids
        assert torch.count_nonzero(batch.batch["advantages"]) > 0

    alien = SigningKey.generate("alien").verifier().to_vkey()
    refusing = ForkgateHooks.from_config(
        _config(address, kappas=[KAPPA], trusted_keys=[alien], max_left_out_fraction=None)
    )
    batch = _scored_batch(address, vkey, tmp_path, RESPONSES)
    assert refusing.before_advantage(batch).refused == 4
    batch = compute_advantage(batch, adv_estimator=fg.ESTIMATOR_NAME)
    assert torch.count_nonzero(batch.batch["advantages"]) == 0  # refused rows: no signal
    with pytest.raises(TrainingStalledError, match="4 refused"):
        ForkgateHooks.from_config(
            _config(address, kappas=[KAPPA], trusted_keys=[alien])
        ).before_advantage(_scored_batch(address, vkey, tmp_path, RESPONSES))


def test_without_a_ratchet_the_hooks_guard_and_stratify(
    address: str, vkey: str, tmp_path: Path
) -> None:
    from forkgate.adapters import verl as fg
    from forkgate.adapters.verl_main import ForkgateHooks

    hooks = ForkgateHooks.from_config(_config(address))
    assert hooks.ratchet is None
    batch = _scored_batch(address, vkey, tmp_path, RESPONSES)
    hooks.before_advantage(batch)
    families = {str(u).split("\x1f")[1] for u in batch.non_tensor_batch["uid"]}
    assert families == {"25,-", "4,*"}  # the labels travel in uid to verl's estimator
    batch.non_tensor_batch[fg.STATUS_KEY] = np.array(["INFRA_ERROR"] * 4, dtype=object)
    with pytest.raises(TrainingStalledError, match="4 unscored"):
        hooks.before_advantage(batch)


def test_a_bad_forkgate_node_is_an_error_before_training() -> None:
    from forkgate.adapters.verl_main import ForkgateHooks

    with pytest.raises(TypeError, match="kapas"):
        ForkgateHooks.from_config(_config("127.0.0.1:1", kapas=[KAPPA]))
    with pytest.raises(ValueError, match="both kappas and trusted_keys"):
        ForkgateHooks.from_config(_config("127.0.0.1:1", kappas=[KAPPA]))
