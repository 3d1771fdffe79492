"""TRL adapter: certd as an async GRPO reward, and GRPO with (question, family) groups.

Example::

    from trl import GRPOConfig
    from forkgate.adapters.trl import CertdReward, StratifiedGRPOTrainer

    reward = CertdReward("127.0.0.1:50051", trusted_keys=["certd-data/signing.pub"])
    trainer = StratifiedGRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=[reward],
        args=GRPOConfig(...), train_dataset=dataset,   # rows: "prompt" and "task" columns
    )
    trainer.train()

``CertdReward`` verifies every completion against its row's task (the ``task`` column: a task
mapping or its JSON text) and returns the verdict's reward; on an infrastructure failure (an
INFRA_ERROR verdict, or certd unreachable) it returns ``None`` for the row, which TRL leaves
out of the baseline and gives advantage 0. ``StratifiedGRPOTrainer`` then replaces TRL's
per-question advantages with ``forkgate.advantages.StratifiedAdvantages`` over the key
(task digest, κ label of the verdict); see ``docs/adapters.md``. Entry-level protection:
``informed=True`` (stratified advantages v2), ``entry_unscored=fn`` (the entry tokens leave the
loss) and ``entropy_monitor=EntropyMonitor(...)`` (watches each batch's entry entropy). Needs
the ``trl`` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import gather_object
from trl.trainer.grpo_trainer import GRPOTrainer

from certd.signing.dsse import KeyRing
from certd.signing.keys import VerifierKey

from .._base import ClientSettings
from ..advantages import TRAINER_SCALE, StratifiedAdvantages, informed_stratified_advantages
from ..connection import Connection
from ..entry import batch_entry_entropy
from ..metrics import EntropyMonitor
from ..ratchet import Admission, Ratchet
from ._scoring import Scored, Scorer, admit_groups, completion_text

__all__ = ["CertdReward", "StratifiedGRPOTrainer", "unscore_completion_entries"]


class CertdReward:
    """An async reward function for ``trl.GRPOTrainer`` that asks certd.

    Args:
        address: certd's host:port, several replicas (a list or comma-separated), or a
            ``forkgate.Connection`` with TLS, client certificate and token; unset settings
            come from the ``FORKGATE_*`` environment.
        trusted_keys: log keys; with them every verdict's receipt is checked offline.
        settings: client settings (timeouts, retries, batch size).
        task_column: the dataset column that holds each row's task.
        name: the name TRL logs the reward under.

    Attributes:
        last: the Scored rollouts of the latest call, in order (the trainer reads the
            families from it).
    """

    def __init__(
        self,
        address: str | Sequence[str] | Connection,
        *,
        trusted_keys: KeyRing | Iterable[str | Path | VerifierKey] | None = None,
        settings: ClientSettings | None = None,
        task_column: str = "task",
        name: str = "certd",
    ) -> None:
        self.scorer = Scorer(address, trusted_keys=trusted_keys, settings=settings)
        self.task_column = task_column
        self.__name__ = name
        self.last: list[Scored] = []

    async def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        """Rewards for one batch of completions; None where certd could not answer.

        Raises:
            KeyError: the dataset has no ``task_column``.
            InvalidRequestError: a task is malformed.
            VerificationError: a receipt does not verify against the trusted keys.
        """
        if self.task_column not in kwargs:
            raise KeyError(
                f"CertdReward needs the dataset column {self.task_column!r} (each row's task)"
            )
        tasks = kwargs[self.task_column]
        scored = await self.scorer.score(tasks, [completion_text(c) for c in completions])
        self.last = scored
        return [s.reward for s in scored]


class StratifiedGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose advantages are stratified by (question, entry family).

    TRL scores the completions as usual (the ``CertdReward`` among ``reward_funcs`` gives each
    completion its verdict); the advantages TRL computed per question are then replaced by
    ``StratifiedAdvantages`` over (task digest, κ label), with the combined reward (TRL's
    reward weights, ``None`` rows left out). Rows every reward function left out get
    advantage 0 and stay out of the family prior. Evaluation batches keep TRL's advantages and
    never enter the prior.

    With a ``ratchet``, each batch's rollouts go through ``Ratchet.admit`` as stratified groups
    (task, family) before any advantage is computed: the rows of a refused group are left out
    like a ``None`` reward, the refusals of the latest batch are in ``refused``, and their
    count is logged as ``forkgate/refused_rollouts``. Give the ``CertdReward`` the same
    trusted keys.

    Args:
        *args: passed to ``GRPOTrainer``.
        stratified: the advantage estimator (its prior window persists across steps); default
            ``StratifiedAdvantages(scale=TRAINER_SCALE)`` (``"family"``, as the verl adapter:
            GRPO's loss expects unit-scale advantages; the formula's own default is ``"none"``).
        certd_reward: the reward function that knows the families; default the one
            ``CertdReward`` among ``reward_funcs``.
        ratchet: when given, only rollouts in groups it admits are trained on.
        informed: use the informed stratified advantages v2
            (``forkgate.advantages.informed_stratified_advantages``: execution term within the
            family, entry term ``V(q, κ) − V(q)`` centred on the question's mean), scaled to
            unit std over the batch, instead of ``stratified``.
        entry_unscored: a function of a completion's token ids giving how many leading tokens
            are its entry (the κ decision); those tokens are left out of the loss
            (``completion_mask`` cleared). None scores every token.
        entropy_monitor: observes each training batch's plug-in entry entropy (mean over
            questions of the entropy of the κ labels) and raises its alarms; logged as
            ``forkgate/entry_entropy``.
        **kwargs: passed to ``GRPOTrainer``.

    Raises:
        ValueError: no ``CertdReward`` is among the reward functions.
    """

    def __init__(
        self,
        *args: Any,
        stratified: StratifiedAdvantages | None = None,
        certd_reward: CertdReward | None = None,
        ratchet: Ratchet | None = None,
        informed: bool = False,
        entry_unscored: Callable[[Sequence[int]], int] | None = None,
        entropy_monitor: EntropyMonitor | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.informed = informed
        self.entry_unscored = entry_unscored
        self.entropy_monitor = entropy_monitor
        self._batches = 0
        found: list[CertdReward] = []
        for func in self.reward_funcs:
            if isinstance(func, CertdReward):
                found.append(func)
        if certd_reward is None and len(found) != 1:
            raise ValueError(
                f"expected exactly one CertdReward among reward_funcs, got {len(found)}"
            )
        self.certd_reward: CertdReward = certd_reward or found[0]
        self.stratified = stratified or StratifiedAdvantages(scale=TRAINER_SCALE)
        self.ratchet = ratchet
        self.refused: list[Admission] = []
        self._scored: list[Scored] = []
        self._rewards_per_func: torch.Tensor | None = None

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, ids: Any) -> Any:
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, ids)
        local = list(self.certd_reward.last)
        self.refused = []
        if self.ratchet is not None:
            local, self.refused = admit_groups(local, self.ratchet)
        # TRL gathers the rewards of every process; gather the verdicts' keys the same way.
        self._scored = list(gather_object(local))
        refused = [i for i, s in enumerate(self._scored) if s.status == "REFUSED"]
        if refused:  # left out of TRL's statistics too, like a None reward
            rewards_per_func[refused] = torch.nan
        mode = "train" if self.model is not None and self.model.training else "eval"
        self._metrics[mode]["forkgate/refused_rollouts"].append(float(len(refused)))
        self._rewards_per_func = rewards_per_func
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        output = super()._generate_and_score_completions(inputs)
        training = self.model is not None and self.model.training
        if not training or self._rewards_per_func is None:
            return output
        advantages = self.stratified_advantages(self._rewards_per_func, self._scored)
        self.observe_entries(self._scored)
        if self.entry_unscored is not None:
            unscore_completion_entries(output, self.entry_unscored)
        n_local = len(output["advantages"])
        start = self.accelerator.process_index * n_local
        output["advantages"] = advantages[start : start + n_local].to(output["advantages"])
        return output

    def stratified_advantages(
        self, rewards_per_func: torch.Tensor, scored: Sequence[Scored]
    ) -> torch.Tensor:
        """Stratified advantages of one gathered batch (0 where every reward was None).

        Args:
            rewards_per_func: float tensor [N, F], NaN where a function returned None.
            scored: the CertdReward outcome of each of the N rows.

        Raises:
            ValueError: the lengths differ.

        Returns:
            Float tensor [N].
        """
        if len(scored) != rewards_per_func.shape[0]:
            raise ValueError(f"expected {rewards_per_func.shape[0]} verdicts, got {len(scored)}")
        weights = self.reward_weights.to(rewards_per_func.device)
        rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1).cpu()
        keep = ~torch.isnan(rewards_per_func).all(dim=1).cpu()
        rows = [i for i in range(len(scored)) if bool(keep[i])]
        out = torch.zeros(len(scored), dtype=torch.float32)
        if rows and self.informed:
            total, _ = informed_stratified_advantages(
                rewards[rows].tolist(),
                [scored[i].question for i in rows],
                [scored[i].family or "" for i in rows],
            )
            adv = torch.tensor(total, dtype=torch.float32)
            out[rows] = adv / (adv.std(unbiased=False) + 1e-6)
        elif rows:
            adv = self.stratified(
                rewards[rows].to(torch.float32),
                [scored[i].question for i in rows],
                [scored[i].family or "" for i in rows],
            )
            out[rows] = adv.to(torch.float32)
        return out

    def observe_entries(self, scored: Sequence[Scored]) -> float | None:
        """Feed the batch's entry entropy to the monitor (if any); return it.

        Rows without a verdict (infrastructure failures, refusals) are left out.
        """
        self._batches += 1
        kept = [s for s in scored if s.reward is not None]
        if self.entropy_monitor is None or not kept:
            return None
        h = batch_entry_entropy([s.question for s in kept], [s.family or "" for s in kept])
        self.entropy_monitor.observe(self._batches, h)
        metrics = getattr(self, "_metrics", None)
        if metrics is not None:
            metrics["train"]["forkgate/entry_entropy"].append(h)
        return h


def unscore_completion_entries(
    output: dict[str, Any], entry_tokens: Callable[[Sequence[int]], int]
) -> None:
    """Clear ``completion_mask`` over each completion's leading entry tokens, in place.

    Raises:
        KeyError: ``output`` lacks ``completion_ids`` or ``completion_mask``.
    """
    ids, mask = output["completion_ids"], output["completion_mask"]
    for i in range(mask.shape[0]):
        n = max(0, int(entry_tokens(ids[i].tolist())))
        mask[i, :n] = 0
