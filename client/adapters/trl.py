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
out of the baseline and gives advantage 0. By default ``StratifiedGRPOTrainer`` trains with
plain GRPO advantages (``forkgate.advantages.grpo_advantages`` per question over the rows
certd scored) and an ``EntropyMonitor`` on; every coverage protection is opt-in
(``docs/adapters.md`` gives each one's measured trade-off): ``stratified=StratifiedAdvantages(
scale=TRAINER_SCALE)`` (groups keyed by task digest and κ label), ``informed=True``
(stratified advantages v2), ``entry_unscored=fn`` (the entry tokens leave the loss),
``entropy_monitor=False`` (the monitor off, or a monitor of your own) and
``entry_kl=w, entry_candidates=fn`` (an entry-distribution KL to the starting policy added to
TRL's loss). Needs the ``trl`` extra.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import gather_object
from trl.trainer.grpo_trainer import GRPOTrainer

from certd.signing.dsse import KeyRing
from certd.signing.keys import VerifierKey

from .._channel import ClientSettings
from ..advantages import (
    StratifiedAdvantages,
    grpo_advantages,
    informed_stratified_advantages,
)
from ..connection import Connection
from ..entry import batch_entry_entropy, entry_kl
from ..errors import SetupError
from ..metrics import EntropyMonitor, default_monitor
from ..ratchet import Admission, Ratchet
from ._guard import LeftOutCounts, LeftOutGuard
from ._scoring import Scored, Scorer, admit_groups, completion_text

# The default trainer (plain GRPO, the ratchet, the guard, the counts and the entropy monitor)
# uses TRL's public API only: the reward function (its ``trainer_state`` and ``log_metric``
# arguments) and ``compute_loss`` (transformers' documented override point). TRL has no public
# advantage or completion-mask hook, so the opt-in estimators (``stratified=``, ``informed=``,
# ``entry_unscored=``, ``entry_kl=``) wrap these two internals on the instance, and only then:
# their parameters are checked when such a trainer is built, so another TRL fails at once and by
# name, never silently.
TESTED_TRL = "1.16.0"
_OPT_IN_INTERNALS = {
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    "_generate_and_score_completions": ("self", "inputs"),
}


def check_trl(trainer_cls: type = GRPOTrainer) -> None:
    """Raise when TRL's GRPOTrainer lacks the internals the opt-in estimators wrap, as tested.

    Raises:
        SetupError: a method is missing or its parameters changed (another TRL version).
    """
    import trl

    for name, params in _OPT_IN_INTERNALS.items():
        fn = getattr(trainer_cls, name, None)
        got = tuple(inspect.signature(fn).parameters) if fn is not None else None
        if got != params:
            raise SetupError(
                f"forkgate.adapters.trl's opt-in estimators are tested with trl=={TESTED_TRL}; "
                f"trl {trl.__version__}'s GRPOTrainer.{name} is {got} (expected {params}): "
                f"install trl=={TESTED_TRL} (pip install 'forkgate[trl]'), or use the default "
                "(plain GRPO), which needs TRL's public API only"
            )


__all__ = [
    "CertdReward",
    "LeftOutGuard",
    "StratifiedGRPOTrainer",
    "TESTED_TRL",
    "check_trl",
    "unscore_completion_entries",
]


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
        last: the Scored rollouts of the latest call, in order (a refused group's rows with
            ``reward=None`` and status ``"REFUSED"``).
        refused: the ratchet's refusals of the latest call.
        ratchet: when set (``StratifiedGRPOTrainer(ratchet=...)`` sets it), each call's
            rollouts are admitted as stratified groups (task, family) and a refused group's
            rows get ``None`` (left out of TRL's baseline, advantage 0).
        on_batch: when set, called with each call's rows (gathered across processes), its
            refusals and TRL's ``log_metric`` (or None); the trainer counts and guards there.
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
        self.refused: list[Admission] = []
        self.ratchet: Ratchet | None = None
        self.on_batch: BatchHook | None = None

    async def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        """Rewards for one batch of completions; None where certd could not answer or the
        ratchet refused the rollout's group.

        Raises:
            KeyError: the dataset has no ``task_column``.
            InvalidRequestError: a task is malformed.
            VerificationError: a receipt does not verify against the trusted keys.
            TrainingStalledError: from ``on_batch`` (the trainer's guard).
        """
        if self.task_column not in kwargs:
            raise KeyError(
                f"CertdReward needs the dataset column {self.task_column!r} (each row's task)"
            )
        tasks = kwargs[self.task_column]
        scored = await self.scorer.score(tasks, [completion_text(c) for c in completions])
        self.refused = []
        if self.ratchet is not None:
            scored, self.refused = admit_groups(scored, self.ratchet)
        self.last = scored
        if self.on_batch is not None:  # TRL gathers rewards; gather the verdicts' keys alike
            self.on_batch(list(gather_object(scored)), self.refused, kwargs.get("log_metric"))
        return [s.reward for s in scored]


# (rows of one batch, gathered; the ratchet's refusals; TRL's log_metric or None)
BatchHook = Callable[[list[Scored], list[Admission], Callable[[str, float], None] | None], None]


class StratifiedGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose advantages are stratified by (question, entry family).

    By default TRL scores the completions (the ``CertdReward`` among ``reward_funcs`` gives
    each completion its verdict, ``None`` for a refused or unscored one) and computes its own
    GRPO advantages: this trainer then uses TRL's public API only (the reward function and
    ``compute_loss``). Opted in (``stratified=``, ``informed=``, ``entry_unscored=``,
    ``entry_kl=``), the advantages TRL computed are replaced by ``StratifiedAdvantages`` over
    (task digest, κ label), with the combined reward (TRL's reward weights, ``None`` rows left
    out): this wraps two TRL internals (``check_trl``). Rows every reward function left out get
    advantage 0 and stay out of the family prior. Evaluation batches keep TRL's advantages and
    never enter the prior.

    With a ``ratchet``, each batch's rollouts go through ``Ratchet.admit`` as stratified groups
    (task, family) before any advantage is computed: the rows of a refused group are left out
    like a ``None`` reward, the refusals of the latest batch are in ``refused``, and their
    count is logged as ``forkgate/refused_rollouts``. Give the ``CertdReward`` the same
    trusted keys. A ratchet built without ``consistency=`` gets the ``CertdReward``'s certd
    as its consistency-proof source, so it follows the log past the first step.

    Every training batch is counted by ``guard``: its refused and unscored (infrastructure
    failure) rollouts are logged (``forkgate/refused_rollouts``,
    ``forkgate/unscored_rollouts``, and the ``forkgate.adapters`` logger), and
    ``TrainingStalledError`` is raised when a batch trains on nothing, or the ratchet refused
    rollouts in several consecutive batches, instead of training on zero signal.

    Args:
        *args: passed to ``GRPOTrainer``.
        stratified: opt in to the stratified estimator (its prior window persists across
            steps), e.g. ``StratifiedAdvantages(scale=TRAINER_SCALE)``; default None: TRL's
            own GRPO advantages per prompt group.
        certd_reward: the reward function that knows the families; default the one
            ``CertdReward`` among ``reward_funcs``.
        ratchet: when given, only rollouts in groups it admits are trained on.
        guard: when training stalls (``LeftOutGuard``); default ``LeftOutGuard()``: raise on
            a batch whose every rollout is refused or unscored, or on 3 consecutive batches
            with refusals.
        informed: use the informed stratified advantages v2
            (``forkgate.advantages.informed_stratified_advantages``: execution term within the
            family, entry term ``V(q, κ) − V(q)`` centred on the question's mean), scaled to
            unit std over the batch, instead of ``stratified``.
        entry_unscored: a function of a completion's token ids giving how many leading tokens
            are its entry (the κ decision); those tokens are left out of the loss
            (``completion_mask`` cleared). None scores every token.
        entropy_monitor: default True, ``EntropyMonitor(max_drop=0.5)``; False: off. It
            observes each training batch's plug-in entry entropy (mean over
            questions of the entropy of the κ labels) and raises its alarms; logged as
            ``forkgate/entry_entropy``.
        entry_kl: the weight of the entry-distribution KL added to TRL's loss (0: none): per
            prompt of the micro-batch, ``forkgate.entry.entry_kl`` between the teacher-forced
            log-probabilities of its feasible entries under the model and under the starting
            policy (TRL's ``ref_model`` when it has one, else a frozen copy of the model taken
            here); the mean over prompts, times the weight, divided like TRL's loss by the
            gradient-accumulation steps; logged as ``forkgate/entry_kl``.
        entry_candidates: a function of a row's task (the ``CertdReward`` task column) giving
            the text each feasible entry opens the completion with (e.g. ``"25-"`` per feasible
            κ label); required when ``entry_kl > 0``.
        **kwargs: passed to ``GRPOTrainer``.

    Raises:
        ValueError: no ``CertdReward`` is among the reward functions, or ``entry_kl > 0``
            without ``entry_candidates``.
        TypeError: an unknown keyword (``GRPOTrainer`` rejects it).
        SetupError: an opt-in estimator on a TRL whose internals changed (``check_trl``).
        TrainingStalledError: from ``train()``, when ``guard`` finds a batch left out.
    """

    def __init__(
        self,
        *args: Any,
        stratified: StratifiedAdvantages | None = None,
        certd_reward: CertdReward | None = None,
        ratchet: Ratchet | None = None,
        guard: LeftOutGuard | None = None,
        informed: bool = False,
        entry_unscored: Callable[[Sequence[int]], int] | None = None,
        entropy_monitor: EntropyMonitor | bool = True,
        entry_kl: float = 0.0,
        entry_candidates: Callable[[Any], Sequence[str]] | None = None,
        **kwargs: Any,
    ) -> None:
        if entry_kl > 0 and entry_candidates is None:
            raise ValueError("entry_kl > 0 needs entry_candidates (a row's feasible entries)")
        super().__init__(*args, **kwargs)
        self.informed = informed
        self.entry_kl = entry_kl
        self.entry_candidates = entry_candidates
        # prompt token ids -> (each feasible entry's token ids, their log-probs at the start)
        self._entries: dict[tuple[int, ...], tuple[list[list[int]], torch.Tensor]] = {}
        self._entry_ref: Any = None
        if entry_kl > 0:
            ref = self.ref_model
            self._entry_ref = ref if ref is not None else _frozen_copy(self.model)
        self.entry_unscored = entry_unscored
        self.entropy_monitor = default_monitor(entropy_monitor)
        self._batches = 0
        found = [f for f in self.reward_funcs if isinstance(f, CertdReward)]
        if certd_reward is None and len(found) != 1:
            raise ValueError(
                f"expected exactly one CertdReward among reward_funcs, got {len(found)}"
            )
        self.certd_reward: CertdReward = certd_reward or found[0]  # type: ignore[assignment]
        self.stratified = stratified
        self.ratchet = None if ratchet is None else self.certd_reward.scorer.bind(ratchet)
        self.certd_reward.ratchet = self.ratchet
        self.certd_reward.on_batch = self._count_batch
        self.guard = guard if guard is not None else LeftOutGuard()
        self.left_out: LeftOutCounts | None = None
        self.refused: list[Admission] = []
        self._scored: list[Scored] = []
        self._rewards_per_func: torch.Tensor | None = None
        opted_in = stratified is not None or informed or entry_unscored is not None
        if opted_in or entry_kl > 0:
            check_trl(type(self))
            # TRL has no public advantage hook: wrap the internals on this instance only.
            self._calculate_rewards = self._rewards_then_left_out  # type: ignore[method-assign]
            self._generate_and_score_completions = (  # type: ignore[method-assign]
                self._replace_advantages
            )

    def _count_batch(
        self,
        scored: list[Scored],
        refused: list[Admission],
        log_metric: Callable[[str, float], None] | None,
    ) -> None:
        """The ``CertdReward``'s hook: count, log and guard one batch (gathered rows)."""
        self._scored = scored
        self.refused = refused
        n_refused = sum(1 for s in scored if s.status == "REFUSED")
        unscored = sum(1 for s in scored if s.status == "INFRA_ERROR")
        if log_metric is not None:  # TRL averages over processes: each logs the gathered count
            log_metric("forkgate/refused_rollouts", float(n_refused))
            log_metric("forkgate/unscored_rollouts", float(unscored))
        if self.model is not None and self.model.training:
            # raises TrainingStalledError rather than train on nothing
            self.left_out = self.guard.check([s.status for s in scored], refused)
            self.observe_entries(scored)

    def _rewards_then_left_out(self, inputs: Any, prompts: Any, completions: Any, ids: Any) -> Any:
        """Opt-in only: TRL's rewards, refused rows NaN for every function, kept for later."""
        rewards_per_func = GRPOTrainer._calculate_rewards(self, inputs, prompts, completions, ids)
        refused = [i for i, s in enumerate(self._scored) if s.status == "REFUSED"]
        if refused:  # left out of every reward function, like a None reward
            rewards_per_func[refused] = torch.nan
        self._rewards_per_func = rewards_per_func
        return rewards_per_func

    def _replace_advantages(self, inputs: Any) -> Any:
        """Opt-in only: TRL's batch with this trainer's advantages (and masks)."""
        self._rewards_per_func = None
        output = GRPOTrainer._generate_and_score_completions(self, inputs)
        training = self.model is not None and self.model.training
        if not training or self._rewards_per_func is None:
            return output
        advantages = self.stratified_advantages(self._rewards_per_func, self._scored)
        if self.entry_unscored is not None:
            unscore_completion_entries(output, self.entry_unscored)
        if self.entry_kl > 0:
            self._remember_entries(inputs, output)
        if self.stratified is None and not self.informed:
            return output  # entry_unscored / entry_kl only: TRL's own advantages
        n_local = len(output["advantages"])
        start = self.accelerator.process_index * n_local
        output["advantages"] = advantages[start : start + n_local].to(output["advantages"])
        return output

    def compute_loss(
        self, model: Any, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        """TRL's loss, plus ``entry_kl`` × the micro-batch's entry KL in training."""
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self.entry_kl <= 0 or not model.training:
            return loss
        kls = []
        for key in dict.fromkeys(_prompt_keys(inputs["prompt_ids"], inputs["prompt_mask"])):
            cands, ref = self._entries.get(key, ([], torch.zeros(0)))
            if len(cands) > 1:
                kls.append(entry_kl(_entry_logps(model, list(key), cands), ref.to(loss.device)))
        if not kls:
            return loss
        kl = torch.stack(kls).mean()
        self._metrics["train"]["forkgate/entry_kl"].append(float(kl.detach()))
        return loss + self.entry_kl * kl / self.current_gradient_accumulation_steps

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
        elif rows and self.stratified is not None:
            adv = self.stratified(
                rewards[rows].to(torch.float32),
                [scored[i].question for i in rows],
                [scored[i].family or "" for i in rows],
            )
            out[rows] = adv.to(torch.float32)
        elif rows:  # the default: plain GRPO per question
            qs = [scored[i].question for i in rows]
            out[rows] = torch.tensor(grpo_advantages(rewards[rows].tolist(), qs))
        return out

    def _remember_entries(self, inputs: Sequence[Any], output: Any) -> None:
        """Each new prompt's feasible entries, tokenised, and their log-probs at the start."""
        self._entries = {}
        column = self.certd_reward.task_column
        # a multimodal processor carries its tokenizer; a tokenizer is its own
        tok: Any = getattr(self.processing_class, "tokenizer", self.processing_class)
        keys = _prompt_keys(output["prompt_ids"], output["prompt_mask"])
        for key, row in zip(keys, inputs, strict=True):
            if key in self._entries:
                continue  # TRL repeats each prompt num_generations times
            texts = self.entry_candidates(row[column]) if self.entry_candidates else []
            cands = [tok.encode(t, add_special_tokens=False) for t in texts]
            cands = [c for c in cands if c]
            with torch.no_grad():
                ref = _entry_logps(self._entry_ref, list(key), cands) if cands else torch.zeros(0)
            self._entries[key] = (cands, ref.detach())

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


def _frozen_copy(model: Any) -> Any:
    """A frozen copy of the model's current weights, in eval mode.

    Not ``copy.deepcopy``: a deep copy taken inside the trainer was seen to run the trained
    weights (its forward still reached the original model), so the KL stayed 0.
    """
    ref = type(model)(model.config)
    ref.load_state_dict(model.state_dict())
    ref.to(next(model.parameters()).device)
    ref.requires_grad_(False)
    return ref.eval()


def _prompt_keys(ids: torch.Tensor, mask: torch.Tensor) -> list[tuple[int, ...]]:
    """Each row's prompt token ids without TRL's left padding."""
    return [tuple(int(t) for t in row[m.bool()]) for row, m in zip(ids, mask, strict=True)]


def _entry_logps(model: Any, prompt: list[int], cands: Sequence[Sequence[int]]) -> torch.Tensor:
    """Teacher-forced log-probability of each candidate entry after ``prompt`` [F]."""
    seqs = [prompt + list(c) for c in cands]
    width = max(len(q) for q in seqs)
    device = next(model.parameters()).device
    ids = torch.zeros((len(seqs), width), dtype=torch.long, device=device)
    attn = torch.zeros_like(ids)
    for i, q in enumerate(seqs):
        ids[i, : len(q)] = torch.tensor(q, device=device)
        attn[i, : len(q)] = 1
    logp = torch.log_softmax(model(input_ids=ids, attention_mask=attn).logits.float(), dim=-1)
    out = []
    for i, c in enumerate(cands):
        pos = torch.arange(len(prompt) - 1, len(prompt) - 1 + len(c), device=device)
        tok = ids[i, len(prompt) : len(prompt) + len(c)]
        out.append(logp[i, pos, tok].sum())
    return torch.stack(out)


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
