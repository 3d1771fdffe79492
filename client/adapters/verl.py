"""verl adapter: certd as verl's ``compute_score``, and a stratified advantage estimator.

Example (verl config, Hydra overrides)::

    reward.custom_reward_function.path=pkg://forkgate.adapters.verl
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.certd_address=127.0.0.1:50051
    +reward.custom_reward_function.reward_kwargs.trusted_keys=[certd-data/signing.pub]
    # a TLS cluster: replicas, CA, token file and the SAN their certificates share
    # (or FORKGATE_SERVER / FORKGATE_TLS_CA / FORKGATE_TOKEN_FILE / ... in the environment)
    +reward.custom_reward_function.reward_kwargs.certd_address=10.0.0.1:50051,10.0.0.2:50051
    +reward.custom_reward_function.reward_kwargs.certd_tls_ca=ca.crt
    +reward.custom_reward_function.reward_kwargs.certd_token_file=trainer.token
    +reward.custom_reward_function.reward_kwargs.certd_tls_server_name=certd.internal
    algorithm.adv_estimator=forkgate_stratified

and, in the driver, before ``compute_advantage``::

    import forkgate.adapters.verl as fg      # registers "forkgate_stratified" with verl
    fg.admit_batch(batch, ratchet)           # optional (certd_keep_rollouts=True): the ratchet
    fg.stratify_uids(batch)                  # the family labels travel in the group index
    batch = compute_advantage(batch, adv_estimator="forkgate_stratified", ...)
    fg.restore_uids(batch)

``compute_score`` verifies ``solution_str`` against the task in ``ground_truth`` (a task mapping
or its JSON text) and returns ``{"score", "acc", "forkgate_family", "forkgate_question",
"forkgate_status"}``; verl's reward manager puts the extra keys into ``non_tensor_batch``. verl
cannot leave a row out, so an infrastructure failure scores 0.0 with status ``INFRA_ERROR``
and the estimator gives the row advantage 0 and keeps it out of the family prior.

verl 0.9.1's ``compute_advantage`` passes a registered estimator ``token_level_rewards``,
``response_mask``, ``config`` and ``index`` (the ``uid`` column) only; ``non_tensor_batch``
only to GDPO. So ``stratify_uids`` writes the key (task digest, family, left-out flag) into
``uid`` (keeping the original in ``forkgate_uid``), and the estimator reads it back; an
estimator called with ``non_tensor_batch`` reads the labels from there instead. Needs the
``verl`` extra and verl itself (``make`` installs it; see ``docs/adapters.md``).

The estimator's default is plain GRPO with an ``EntropyMonitor`` on; the protections are
opt-in: ``StratifiedEstimator(stratified=True)`` (the family prior window),
``StratifiedEstimator(informed=True)`` (stratified advantages v2),
``entry_unscored=True`` with ``mark_entry_tokens(batch, fn)`` before ``stratify_uids`` (the
entry tokens get advantage 0), and ``entropy_monitor=EntropyMonitor(...)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

from ..advantages import (
    TRAINER_SCALE,
    Scale,
    StratifiedAdvantages,
    grpo_advantages,
    informed_stratified_advantages,
)
from ..connection import Connection, split_addresses
from ..entry import batch_entry_entropy
from ..metrics import EntropyMonitor, default_monitor
from ._guard import LeftOutGuard
from ._verl_batch import (
    _LEFT_OUT,
    _SEP,
    ENTRY_TOKENS_KEY,
    ESTIMATOR_NAME,
    FAMILY_KEY,
    QUESTION_KEY,
    ROLLOUT_KEY,
    STATUS_KEY,
    _score_dict,
    _scorer,
    admit_batch,
    bind_ratchet,
    guard_batch,
    mark_entry_tokens,
    restore_uids,
    stratify_uids,
)

__all__ = [
    "DEFAULT_ESTIMATOR",
    "ENTRY_TOKENS_KEY",
    "ESTIMATOR_NAME",
    "FAMILY_KEY",
    "LeftOutGuard",
    "QUESTION_KEY",
    "ROLLOUT_KEY",
    "STATUS_KEY",
    "StratifiedEstimator",
    "admit_batch",
    "bind_ratchet",
    "compute_score",
    "guard_batch",
    "mark_entry_tokens",
    "restore_uids",
    "stratify_uids",
]


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    certd_address: str | Sequence[str] | None = None,
    trusted_keys: Sequence[str] | None = None,
    certd_linger_s: float = 0.02,
    certd_keep_rollouts: bool = False,
    certd_tls_ca: str | None = None,
    certd_tls_cert: str | None = None,
    certd_tls_key: str | None = None,
    certd_token_file: str | None = None,
    certd_tls_server_name: str | None = None,
    reward_router_address: Any = None,
    reward_model_tokenizer: Any = None,
) -> dict[str, Any]:
    """verl's reward function: one response verified by certd.

    Args:
        data_source: the dataset name (unused: the task names its domain).
        solution_str: the decoded response.
        ground_truth: the task (a mapping or its JSON text).
        extra_info: verl's per-row extras (unused).
        certd_address: certd's host:port, or several replicas' IP:port (a list or
            comma-separated) (``reward_kwargs.certd_address``); default
            ``$FORKGATE_SERVER`` or 127.0.0.1:50051.
        trusted_keys: log keys (vkey strings or files); with them each receipt is checked.
        certd_linger_s: verl scores row by row; the calls of this many seconds share one
            VerifyBatch (one receipt, one ledger entry) instead of one each.
        certd_keep_rollouts: also return ``forkgate_rollout``, the response, verdict and
            receipt as JSON text (a few KB a row), so that ``admit_batch`` can run the
            batch through a ratchet.
        certd_tls_ca: CA file of certd's certificate (TLS on); default ``$FORKGATE_TLS_CA``.
        certd_tls_cert: client certificate file (mutual TLS), with ``certd_tls_key``.
        certd_tls_key: its key file.
        certd_token_file: a file holding the bearer token (default
            ``$FORKGATE_TOKEN_FILE``, or the token in ``$FORKGATE_TOKEN``).
        certd_tls_server_name: the SAN every replica's certificate carries (several
            replica addresses over TLS).
        reward_router_address: passed by verl's reward loop when a reward model serves;
            unused.
        reward_model_tokenizer: likewise; unused.

    Any other keyword (a misspelt ``reward_kwargs`` entry such as ``certd_adress``) is a
    ``TypeError``: it would otherwise be dropped and certd looked for at the default address.

    Raises:
        TypeError: an unknown keyword.
        InvalidRequestError: the task is malformed.
        VerificationError: a receipt does not verify against the trusted keys.

    Returns:
        ``score`` (the reward; 0.0 on an infrastructure failure), ``acc`` (CORRECT or not) and
        the family, question (task digest) and status under the ``forkgate_*`` keys.
    """
    conn = Connection.from_env(
        addresses=split_addresses(certd_address) if certd_address else None,
        tls_ca=certd_tls_ca,
        tls_cert=certd_tls_cert,
        tls_key=certd_tls_key,
        token_file=certd_token_file,
        tls_server_name=certd_tls_server_name,
    )
    scorer = _scorer(conn, trusted_keys, certd_linger_s)
    return _score_dict(await scorer.score_one(ground_truth, solution_str), certd_keep_rollouts)


class StratifiedEstimator:
    """A verl advantage estimator: plain GRPO by default, (question, family) groups opt-in.

    By default each row's advantage is plain GRPO's ``(r − mean) / std`` within its question
    (``forkgate.advantages.grpo_advantages``, refused and INFRA_ERROR rows left out) and an
    ``EntropyMonitor`` is on; every coverage protection is opt-in (``docs/adapters.md``).
    Call ``register(name)`` to make it a verl ``adv_estimator``; the instance keeps the prior
    window across steps (see ``forkgate.advantages`` for the formulas). Outcome rewards only:
    each row's score is the sum of its ``token_level_rewards``, and its advantage is spread
    over its response tokens.

    Args:
        stratified: opt in to the stratified advantages over (question, family) groups with
            the family prior window (default False: plain GRPO).
        window_batches, alpha, beta, prior_weight, scale, eps: as ``StratifiedAdvantages``,
            except ``scale``, which defaults to ``forkgate.advantages.TRAINER_SCALE``
            (``"family"``: a trainer's loss expects unit-scale advantages), as in the TRL
            adapter.
        informed: use the informed stratified advantages v2 (execution term within the family,
            entry term ``V(q, κ) − V(q)``; ``forkgate.advantages``), scaled to unit std over
            the batch, instead of the prior window.
        entry_unscored: leave each row's entry tokens (``mark_entry_tokens`` before
            ``stratify_uids``) out: their advantage is 0.
        entropy_monitor: observes each batch's plug-in entry entropy and raises its alarms;
            default True, ``EntropyMonitor(max_drop=0.5)``; False: off.
    """

    def __init__(
        self,
        *,
        stratified: bool = False,
        window_batches: int = 16,
        alpha: float = 1.0,
        beta: float = 1.0,
        prior_weight: float = 1.0,
        scale: Scale = TRAINER_SCALE,
        eps: float = 1e-6,
        informed: bool = False,
        entry_unscored: bool = False,
        entropy_monitor: EntropyMonitor | bool = True,
    ) -> None:
        self.stratified = stratified
        self.informed = informed
        self.entry_unscored = entry_unscored
        self.entropy_monitor = default_monitor(entropy_monitor)
        self.batches = 0
        self.advantages = StratifiedAdvantages(
            window_batches=window_batches,
            alpha=alpha,
            beta=beta,
            prior_weight=prior_weight,
            scale=scale,
            eps=eps,
        )

    def register(self, name: str) -> StratifiedEstimator:
        """Register with verl under ``name`` (again for the same instance is a no-op).

        Raises:
            ValueError: another estimator has that name.
        """
        if ADV_ESTIMATOR_REGISTRY.get(name) is not self:
            register_adv_est(name)(self)
        return self

    def __call__(
        self,
        token_level_rewards: torch.Tensor,
        response_mask: torch.Tensor,
        index: np.ndarray | None = None,
        config: Any = None,
        non_tensor_batch: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """verl's estimator interface: (advantages, returns), both [batch, response_length].

        Raises:
            ValueError: the family labels are in neither ``non_tensor_batch`` nor ``index``.
        """
        n = len(token_level_rewards)
        questions, families, left_out, entry = _labels(index, non_tensor_batch, n)
        scores = token_level_rewards.sum(dim=-1)
        adv = torch.zeros_like(scores)
        rows = [i for i, out in enumerate(left_out) if not out]
        if rows:
            picked = torch.tensor(rows, dtype=torch.long)
            a = self._advantages(
                scores[picked].detach().cpu().to(torch.float32),
                [questions[i] for i in rows],
                [families[i] for i in rows],
            )
            adv[picked.to(adv.device)] = a.to(adv)
            self.observe([questions[i] for i in rows], [families[i] for i in rows])
        mask = response_mask
        if self.entry_unscored:
            mask = response_mask.clone()
            for i, k in enumerate(entry):
                mask[i, :k] = 0
        token_adv = adv.unsqueeze(-1) * mask
        return token_adv, token_adv

    def _advantages(
        self, scores: torch.Tensor, questions: list[str], families: list[str]
    ) -> torch.Tensor:
        if not self.informed and not self.stratified:
            return torch.tensor(grpo_advantages(scores.tolist(), questions), dtype=torch.float32)
        if not self.informed:
            return self.advantages(scores, questions, families)
        total, _ = informed_stratified_advantages(scores.tolist(), questions, families)
        a = torch.tensor(total, dtype=torch.float32)
        return a / (a.std(unbiased=False) + 1e-6)

    def observe(self, questions: list[str], families: list[str]) -> float | None:
        """Feed one batch's entry entropy to the monitor (if any); return it."""
        self.batches += 1
        if self.entropy_monitor is None:
            return None
        h = batch_entry_entropy(questions, families)
        self.entropy_monitor.observe(self.batches, h)
        return h


def _labels(
    index: np.ndarray | None, nt: Mapping[str, Any] | None, n: int
) -> tuple[list[str], list[str], list[bool], list[int]]:
    if nt is not None and FAMILY_KEY in nt and QUESTION_KEY in nt:
        statuses = nt.get(STATUS_KEY, [""] * n)
        return (
            [str(q) for q in nt[QUESTION_KEY]],
            [str(f) for f in nt[FAMILY_KEY]],
            [s in _LEFT_OUT for s in statuses],
            [int(k) for k in nt.get(ENTRY_TOKENS_KEY, [0] * n)],
        )
    parts = [str(k).split(_SEP) for k in (index if index is not None else [])]
    if len(parts) != n or any(len(p) not in (3, 4) for p in parts):
        raise ValueError(
            f"{ESTIMATOR_NAME} needs the family labels: call "
            "forkgate.adapters.verl.stratify_uids(data) before compute_advantage"
        )
    entry = [int(p[3]) if len(p) == 4 else 0 for p in parts]
    return [p[0] for p in parts], [p[1] for p in parts], [p[2] == "1" for p in parts], entry


DEFAULT_ESTIMATOR = StratifiedEstimator().register(ESTIMATOR_NAME)
