"""verl's PPO driver with ForkGate's hooks, so using ForkGate in verl is configuration only.

Example (the same Hydra overrides as ``python -m verl.trainer.main_ppo``)::

    python -m forkgate.adapters.verl_main ... \\
      reward.custom_reward_function.path=pkg://forkgate.adapters.verl \\
      reward.custom_reward_function.name=compute_score \\
      +reward.custom_reward_function.reward_kwargs.certd_address=127.0.0.1:50051 \\
      +reward.custom_reward_function.reward_kwargs.certd_keep_rollouts=true \\
      algorithm.adv_estimator=forkgate_stratified \\
      '+forkgate.trusted_keys=[certd-data/signing.pub]' \\
      '+forkgate.kappas=[countdown.first-op.v1]'

Stock verl 0.9.1 passes a registered estimator no ``non_tensor_batch``, so the family labels
must reach it through ``uid``: ``ForkgatePPOTrainer`` (a ``RayPPOTrainer`` subclass) runs
``ForkgateHooks.before_advantage`` on each training batch before verl computes its advantages
(admission through the ratchet when ``forkgate.kappas`` and ``forkgate.trusted_keys`` are set,
the left-out guard, ``stratify_uids``) and ``after_advantage`` (``restore_uids``) before the
critic or actor update. The guard's limits are ``forkgate.max_left_out_fraction`` (default
1.0; null turns it off) and ``forkgate.max_refusing_steps`` (default 3).

The driver runs verl's ``RayPPOTrainer`` (``trainer.use_v1=false``; verl 0.9.1's v1 trainer
needs ``transfer_queue`` and is not covered) in decoupled mode: the hook sits in
``_compute_old_log_prob``, which rollout correction's bypass mode skips, so that mode is
refused.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import ray
from omegaconf import OmegaConf
from verl.trainer.main_ppo_v0 import BaseTaskRunner
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from ..ratchet import Admission, Ratchet
from ._guard import LeftOutCounts, LeftOutGuard
from ._verl_batch import admit_batch, guard_batch, restore_uids, stratify_uids

__all__ = ["ForkgateHooks", "ForkgatePPOTrainer", "main"]

log = logging.getLogger("forkgate.adapters")


class ForkgateHooks:
    """What the driver does to each training batch around verl's advantage computation.

    Args:
        ratchet: admits the batch's (task, family) groups; None admits every scored row.
        guard: counts refused and unscored rows; raises ``TrainingStalledError``.
        certd_address: certd, for the ratchet's consistency proofs.
    """

    def __init__(
        self,
        *,
        ratchet: Ratchet | None = None,
        guard: LeftOutGuard | None = None,
        certd_address: str | None = None,
    ) -> None:
        self.ratchet = ratchet
        self.guard = guard if guard is not None else LeftOutGuard()
        self.certd_address = certd_address
        self.refused: list[Admission] = []

    @classmethod
    def from_config(cls, config: Any) -> ForkgateHooks:
        """Hooks from verl's config: the ``forkgate`` node and the reward's ``certd_address``.

        Raises:
            TypeError: an unknown key under ``forkgate``.
            ValueError: ``kappas`` without ``trusted_keys`` (or the reverse).
        """
        node: Mapping[str, Any] = _plain(config.get("forkgate")) or {}
        known = {"kappas", "trusted_keys", "max_left_out_fraction", "max_refusing_steps"}
        unknown = sorted(set(node) - known)
        if unknown:
            raise TypeError(f"forkgate: unknown keys {unknown} (known: {sorted(known)})")
        kappas, keys = node.get("kappas"), node.get("trusted_keys")
        if bool(kappas) != bool(keys):
            raise ValueError("forkgate: the ratchet needs both kappas and trusted_keys")
        reward = _plain(config.get("reward", {})).get("custom_reward_function", {}) or {}
        address = (reward.get("reward_kwargs") or {}).get("certd_address")
        guard = LeftOutGuard(
            max_left_out_fraction=node.get("max_left_out_fraction", 1.0),
            max_refusing_steps=int(node.get("max_refusing_steps", 3)),
        )
        ratchet = Ratchet(list(keys), kappas=set(kappas)) if kappas and keys else None
        return cls(ratchet=ratchet, guard=guard, certd_address=address)

    def before_advantage(self, data: Any) -> LeftOutCounts:
        """Admit, guard and stratify one scored ``DataProto`` in place.

        Raises:
            KeyError: the batch lacks the ``forkgate_*`` columns (score with
                ``forkgate.adapters.verl.compute_score``; ``certd_keep_rollouts=true`` for
                the ratchet).
            TrainingStalledError: the guard's limits are passed.
        """
        if self.ratchet is not None:
            self.refused = admit_batch(
                data, self.ratchet, guard=self.guard, certd_address=self.certd_address
            )
        else:
            guard_batch(data, self.guard)
        stratify_uids(data)
        assert self.guard.last is not None  # set by the guard's check above
        return self.guard.last

    def after_advantage(self, data: Any) -> None:
        """Put the original ``uid`` back (a no-op when it is already back)."""
        restore_uids(data)


class ForkgatePPOTrainer(RayPPOTrainer):
    """``RayPPOTrainer`` with ``ForkgateHooks`` around the advantage computation.

    Raises:
        ValueError: rollout correction's bypass mode is on (it skips the hook's place).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        corr = self.config.algorithm.get("rollout_correction", None)
        if corr is not None and corr.get("bypass_mode", False):
            raise ValueError(
                "forkgate.adapters.verl_main needs algorithm.rollout_correction.bypass_mode="
                "false: the family labels are set where verl recomputes old log-probs"
            )
        self.forkgate = ForkgateHooks.from_config(self.config)
        if not log.handlers:  # each step's refused/unscored counts reach the run's log
            log.addHandler(logging.StreamHandler())
            log.setLevel(logging.INFO)

    def _compute_old_log_prob(self, batch: Any) -> Any:
        # verl's fit() calls this once per training batch after scoring and before
        # compute_advantage: the forkgate_* columns are in non_tensor_batch, uid is free.
        self.forkgate.before_advantage(batch)
        return super()._compute_old_log_prob(batch)

    def _update_critic(self, batch: Any) -> Any:
        self.forkgate.after_advantage(batch)
        return super()._update_critic(batch)

    def _update_actor(self, batch: Any) -> Any:
        self.forkgate.after_advantage(batch)
        return super()._update_actor(batch)


def _plain(node: Any) -> dict[str, Any]:
    if node is None:
        return {}
    if OmegaConf.is_config(node):
        out = OmegaConf.to_container(node, resolve=True)
        return {str(k): v for k, v in out.items()} if isinstance(out, dict) else {}
    return dict(node)


@ray.remote
class ForkgateTaskRunner(BaseTaskRunner):
    """verl 0.9.1's ``main_ppo_v0.TaskRunner.run``, building ``ForkgatePPOTrainer``."""

    def run(self, config: Any) -> None:
        from verl.trainer.ppo import utils as ppo_utils
        from verl.utils import config as config_utils
        from verl.utils.dataset.rl_dataset import collate_fn

        me: Any = self  # verl's runner methods are untyped
        pu: Any = ppo_utils
        cu: Any = config_utils
        OmegaConf.resolve(config)
        ForkgateHooks.from_config(config)  # a bad forkgate node fails before any worker
        actor_rollout_cls, worker_group_cls = me.add_actor_rollout_worker(config)
        me.add_critic_worker(config)
        me.add_reward_model_resource_pool(config)
        me.add_teacher_model_resource_pool(config)
        me.add_ref_policy_worker(config, actor_rollout_cls)
        cu.validate_config(
            config=config,
            use_reference_policy=pu.need_reference_policy(config),
            use_critic=pu.need_critic(config),
        )
        model = cu.omega_conf_to_dataclass(config.actor_rollout_ref.model)
        tokenizer, processor = model.tokenizer, model.processor
        data = config.data
        train = pu.create_rl_dataset(
            data.train_files, data, tokenizer, processor, is_train=True,
            max_samples=data.get("train_max_samples", -1),
        )  # fmt: skip
        val = pu.create_rl_dataset(
            data.val_files, data, tokenizer, processor, is_train=False,
            max_samples=data.get("val_max_samples", -1),
        )  # fmt: skip
        trainer: Any = ForkgatePPOTrainer(
            config=config,
            tokenizer=tokenizer,
            processor=processor,
            role_worker_mapping=me.role_worker_mapping,
            resource_pool_manager=me.init_resource_pool_mgr(config),
            ray_worker_group_cls=worker_group_cls,
            train_dataset=train,
            val_dataset=val,
            collate_fn=collate_fn,
            train_sampler=pu.create_rl_sampler(data, train),
        )
        trainer.init_workers()
        trainer.fit()


def main() -> None:
    """``python -m forkgate.adapters.verl_main`` with verl's ``ppo_trainer`` config."""
    import hydra
    import verl.trainer.main_ppo as verl_main
    from verl.trainer.main_ppo import run_ppo

    config_dir = os.path.join(os.path.dirname(verl_main.__file__), "config")

    @hydra.main(config_path=config_dir, config_name="ppo_trainer", version_base=None)
    def _run(config: Any) -> None:
        from verl.utils.device import auto_set_device

        auto_set_device(config)
        config.trainer.use_v1 = False  # the RayPPOTrainer path (ForkgatePPOTrainer)
        run_ppo(config, task_runner_class=ForkgateTaskRunner)

    _run()


if __name__ == "__main__":
    main()
