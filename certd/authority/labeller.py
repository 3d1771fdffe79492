"""Certify under the learned κ: apply the model the operator recorded for the question.

Example (see tests/integration/test_learned_kappa_service.py for a running server)::

    labeller = LearnedLabeller.from_config(cfg)        # None when no task set uses it
    labeller.default_kappa(task)                        # the κ the task's set chose, or ""
    model, steps = labeller.fit_model(digest, domain, rollouts, verify)   # operator only
    labelled = labeller.label(digest, domain, kappa, witness, ledger)
    labelled.family.label, labelled.canonical           # 'k2', 'learned:k2'

**Fitting is an operator action** (``certd kappa-fit --rollouts FILE``,
``certd.authority.kappa_models``): the operator's trusted rollouts of a question are verified
with the domain's checker, the first steps of the CORRECT ones (at least ``min_fit_steps``; a
verdict that depends on the machine's load, such as TIME_LIMIT, is checked once more and refused
if it stays so) are embedded and clustered (``certd.kappa``), and the model (embedding model
hash, method and threshold, centroids, medoids, sizes, the steps) is recorded as a signed
``kappa-model`` statement under the ledger key ``kappa-model/<task digest>/<κ>``.

**Certify only applies a recorded model.** Whatever a request's label fields carry (rollouts,
steps, clusters) is ignored; without a recorded model the request is refused
(``KAPPA_NOT_FITTED``). A witness's label is the cluster its first step's embedding is nearest
to; a step farther than the threshold from every centroid, or no step at all, is ``outside``,
one label for every such witness, so decoy first steps make at most one family. Each
certificate names the model by ``clusters_digest`` and ``clusters_index`` (the record's ledger
index), so anyone who embeds its witness's first step with the same model recomputes its label.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from certd.config import CertdConfig, LearnedKappaConfig
from certd.domains.verdict import Family, Status
from certd.errors import CertificationRefusedError, ConfigError, InvalidInputError
from certd.kappa.clustering import OUTSIDE, ClusterModel, ClusterParams, assign, cosines
from certd.kappa.learned import EMBED_DIM, Embedder, LearnedKappa, kappa_learned_name
from certd.kappa.steps import domains, first_step
from certd.ledger.modelkeys import model_key, parse_model_entry
from certd.taskspec import identity_gap

if TYPE_CHECKING:
    from certd.ledger.log import Ledger

__all__ = ["LearnedLabel", "LearnedLabeller"]

LEARNED = "learned"

Verify = Callable[[Sequence[str]], list[Status]]
"""Each of a question's rollouts' verdict status under the domain's checker."""

INDEFINITE = frozenset({Status.TIME_LIMIT, Status.MEMORY_LIMIT, Status.INFRA_ERROR})
"""Statuses that depend on the machine's load, not on the rollout alone: such a rollout is
checked once more, and a fit never rests on one (it would not be reproducible)."""


@dataclass(frozen=True, slots=True)
class LearnedLabel:
    """The witness's family under the learned κ and its gate key."""

    family: Family
    canonical: str


@dataclass(frozen=True, slots=True)
class _Known:
    """A recorded model and its ledger index."""

    model: ClusterModel
    index: int


def _refuse(reason: str, detail: str) -> CertificationRefusedError:
    return CertificationRefusedError(detail, reason=reason)


class LearnedLabeller:
    """Labels Certify witnesses under ``<domain>.learned.v1`` for the configured task sets.

    Args:
        cfg: the ``learned_kappa`` config section.
        choices: task digest → the κ its task set chose (``learned`` or a κ base name).
        embedder: the sentence embedder (default: the packaged model, loaded on first use).
        model_sha256: the embedder's weights hash (for the κ names without loading it).
    """

    def __init__(
        self,
        cfg: LearnedKappaConfig,
        choices: Mapping[str, tuple[str, float | None]],
        model_sha256: str,
        embedder: Embedder | None = None,
    ) -> None:
        self._cfg = cfg
        self._choices = {digest: kappa for digest, (kappa, _) in choices.items()}
        self._params = {
            digest: ClusterParams(
                distance_threshold=cfg.distance_threshold if t is None else t,
                max_steps=cfg.max_fit_steps,
                max_distinct=cfg.max_distinct,
                max_clusters=cfg.max_clusters,
            )
            for digest, (_, t) in choices.items()
        }
        self._sha = model_sha256
        self._names = {
            kappa_learned_name(d, model_sha256, p) for p in self._params.values() for d in domains()
        }
        self._embedder = embedder
        self._lock = threading.Lock()
        self._embed_lock = threading.Lock()
        self._models: collections.OrderedDict[tuple[str, str], _Known] = collections.OrderedDict()

    @classmethod
    def from_config(cls, cfg: CertdConfig) -> LearnedLabeller | None:
        """The labeller of ``cfg.learned_kappa``, or None when no task set chose a κ.

        Raises:
            ConfigError: a configured task does not parse, or the model is missing.
        """
        section = cfg.learned_kappa
        if not section.task_sets:
            return None
        from certd.kappa.weights import WEIGHTS, model_dir, sha256_file
        from certd.payloads import task_digest
        from certd.task_object import parse_task_object

        choices: dict[str, tuple[str, float | None]] = {}
        for ts in section.task_sets:
            for i, obj in enumerate(ts.tasks):
                try:
                    task = parse_task_object(obj, stacklevel=3)
                except ValueError as e:
                    raise ConfigError(f"learned_kappa.task_sets[{ts.name}].tasks[{i}]: {e}") from e
                gap = identity_gap(task)
                if gap is not None:
                    raise ConfigError(
                        f"learned_kappa.task_sets[{ts.name}].tasks[{i}]: {gap[0]} required: "
                        f"{gap[1]}"
                    )
                choices[task_digest(task)] = (ts.kappa, ts.distance_threshold)
        return cls(section, choices, sha256_file(model_dir() / WEIGHTS))

    @property
    def model_sha256(self) -> str:
        """SHA-256 of the embedder's weights file (in every κ name and model record)."""
        return self._sha

    @property
    def names(self) -> tuple[str, ...]:
        """Every learned κ name served here (one per domain and clustering threshold), sorted."""
        return tuple(sorted(self._names))

    def owns(self, kappa: str) -> bool:
        """Whether ``kappa`` is one of the learned κ names served here."""
        return kappa in self._names

    def name_for(self, task_digest: str, domain: str) -> str:
        """The learned κ of a task whose set chose it ("" otherwise)."""
        if self._choices.get(task_digest) != LEARNED or domain not in domains():
            return ""
        return kappa_learned_name(domain, self._sha, self._params[task_digest])

    def default_kappa(self, task_digest: str, domain: str, kappas: tuple[str, ...]) -> str:
        """The κ the task's set chose, as a full name ("" when it is in no set).

        ``learned`` names the task's learned κ (its domain, its set's threshold); a base
        name (``math.first-step.v1``) names the checker's κ that starts with it.
        """
        choice = self._choices.get(task_digest, "")
        if choice == LEARNED:
            return self.name_for(task_digest, domain)
        if not choice:
            return ""
        return next((k for k in kappas if k == choice or k.startswith(choice + "+")), "")

    def _get_embedder(self) -> Embedder:
        with self._embed_lock:
            if self._embedder is None:
                from certd.kappa.embedder import StepEmbedder

                self._embedder = StepEmbedder.load(threads=self._cfg.embed_threads, screen="off")
            return self._embedder

    def _recorded(self, key: tuple[str, str], ledger: Ledger) -> _Known | None:
        """The model the operator recorded for (task, κ), or None."""
        with self._lock:
            known = self._models.get(key)
        if known is not None:
            return known
        at = ledger.find(model_key(*key))
        if at is None:
            return None
        p = parse_model_entry(ledger.entry(at))
        if p is None or (p.get("task_digest"), p.get("kappa")) != key:
            return None
        if p.get("embedding_model_sha256") != self._sha:
            raise _refuse(
                "KAPPA_NOT_FITTED",
                f"the model recorded at ledger index {at} was fitted with embedding model "
                f"{str(p.get('embedding_model_sha256'))[:12]}…, this certd has {self._sha[:12]}…",
            )
        model = ClusterModel.from_json(str(p["clusters"]), self._params[key[0]], dim=EMBED_DIM)
        recorded = _Known(model, at)
        self._remember(key, recorded)
        return recorded

    def _remember(self, key: tuple[str, str], known: _Known) -> None:
        with self._lock:
            self._models[key] = known
            self._models.move_to_end(key)
            while len(self._models) > self._cfg.max_models:
                self._models.popitem(last=False)

    def fit_model(
        self, task_digest: str, domain: str, responses: Sequence[str], verify: Verify
    ) -> tuple[ClusterModel, str]:
        """Fit a question's model on the operator's rollouts (``certd kappa-fit``).

        Raises:
            InvalidInputError: too few distinct rollouts verify CORRECT and write a first step
                (``min_fit_steps``), more than ``max_fit_steps`` rollouts, or verdicts that
                stay indefinite.

        Returns:
            The model and the fitted steps (a sorted JSON array).
        """
        cfg = self._cfg
        if len(responses) > cfg.max_fit_steps:
            raise InvalidInputError(
                f"rollouts: at most max_fit_steps={cfg.max_fit_steps} per question, "
                f"got {len(responses)}",
                field="rollouts",
            )
        distinct = sorted(set(responses))
        try:
            correct = _correct(distinct, verify)
        except CertificationRefusedError as e:
            raise InvalidInputError(f"rollouts: {e}", field="rollouts") from e
        steps = [s for s in (first_step(domain, r) for r in correct) if s]
        if len(steps) < cfg.min_fit_steps:
            raise InvalidInputError(
                f"rollouts of task {task_digest[:16]}…: {len(correct)} of {len(distinct)} "
                f"distinct rollouts verify CORRECT and {len(steps)} of those write a first "
                f"step; a fit needs at least min_fit_steps={cfg.min_fit_steps}",
                field="rollouts",
            )
        steps = [s[: cfg.max_step_chars] for s in steps]
        model = LearnedKappa("", self._get_embedder(), self._params[task_digest]).fit_steps(steps)
        return model, json.dumps(sorted(steps), ensure_ascii=False)

    def label(
        self, task_digest: str, domain: str, kappa: str, witness: str, ledger: Ledger
    ) -> LearnedLabel:
        """The witness's label under the model recorded for its task.

        Raises:
            CertificationRefusedError: the task's set did not choose the learned κ
                (``KAPPA_UNKNOWN``), or no model is recorded for it (``KAPPA_NOT_FITTED``).

        Returns:
            The label (with the record's fields) and the gate key ``learned:<label>``.
        """
        if not kappa or self.name_for(task_digest, domain) != kappa:
            raise _refuse(
                "KAPPA_UNKNOWN",
                f"κ {kappa!r} is not chosen for this task (learned_kappa.task_sets)",
            )
        known = self._recorded((task_digest, kappa), ledger)
        if known is None:
            raise _refuse(
                "KAPPA_NOT_FITTED",
                "no model of this κ is recorded for this task: the operator fits one on "
                "trusted rollouts with `certd kappa-fit --rollouts FILE` (a Certify never fits)",
            )
        model = known.model
        step = first_step(domain, witness)
        vector = None if step is None else self._get_embedder().embed([step])[0]
        # No step, or a step far from every recorded cluster: one label, ``outside``.
        label = OUTSIDE if vector is None else assign(model, vector)
        out: dict[str, str] = {
            "step": step or "",
            "clusters_digest": model.digest,
            "clusters_index": str(known.index),
        }
        if vector is not None:
            out["cosine"] = f"{max(cosines(model, vector)):.6f}"
        if label == OUTSIDE:
            out["outside"] = "true"
        return LearnedLabel(Family(kappa, label, out), f"learned:{label}")


def _correct(distinct: list[str], verify: Verify) -> list[str]:
    """The rollouts that verify CORRECT, in order; indefinite verdicts are checked once more.

    Raises:
        CertificationRefusedError: a rollout's verdict stays TIME_LIMIT, MEMORY_LIMIT or
            INFRA_ERROR (``CLUSTERS_UNVERIFIED``): which rollouts count would depend on the
            machine's load, so the fit would not be reproducible.
    """
    statuses = verify(distinct)
    again = [i for i, s in enumerate(statuses) if s in INDEFINITE]
    if again:
        for i, s in zip(again, verify([distinct[i] for i in again]), strict=True):
            statuses[i] = s
    stuck = [statuses[i].name for i in again if statuses[i] in INDEFINITE]
    if stuck:
        raise _refuse(
            "CLUSTERS_UNVERIFIED",
            f"label.fields['responses']: {len(stuck)} of {len(distinct)} distinct rollouts got "
            f"no definite verdict twice ({', '.join(sorted(set(stuck)))}); retry later, or "
            "leave those rollouts out",
        )
    return [r for r, s in zip(distinct, statuses, strict=True) if s is Status.CORRECT]
