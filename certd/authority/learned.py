"""Certify under the learned κ: fit a question's clusters once, record them, recompute labels.

Example (see tests/integration/test_learned_kappa_service.py for a running server)::

    labeller = LearnedLabeller.from_config(cfg)        # None when no task set uses it
    labeller.default_kappa(task)                        # the κ the task's set chose, or ""
    labelled = labeller.label(digest, domain, kappa, witness, fields, index, verify=...)
    labelled.family.label, labelled.canonical           # 'k2', 'learned:k2'

**The first certificate of a (task, κ)** must carry the question's rollouts in the claimed
label's fields (``fields["responses"]``: a JSON array of strings, at most ``max_fit_steps``).
certd verifies every distinct rollout with the domain's checker and keeps the first steps of
the CORRECT ones (at least ``min_fit_steps``; a verdict that depends on the machine's load,
such as TIME_LIMIT, is checked once more and refused if it stays so): a client cannot shape
the clusters with decoy steps no correct solution writes. certd embeds and clusters those
steps itself (``certd.kappa``, its own parameters: the client chooses the sample, never the
clusters), labels the witness, and records the fitted model in that certificate's ``label_fields``:
``clusters`` (centroids, names, sizes, medoids, method), ``clusters_digest``,
``clusters_steps`` (the sorted steps, so anyone can refit) and ``clusters_responses`` (the
SHA-256 of the verified rollouts, sorted, as a JSON array).
**Every later certificate** of the same (task, κ) is labelled with the recorded centroids,
whatever rollouts its request carries, and names them by ``clusters_digest``
and ``clusters_index`` (the ledger index of the record): its label is checkable by anyone who
embeds its witness's first step with the same model. Between a fit and its first durable
certificate the model is kept in memory, so concurrent first requests share one fit.
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from certd.config import CertdConfig, LearnedKappaConfig
from certd.domains.verdict import Family, Status
from certd.errors import CertificationRefusedError, ConfigError, InvalidInputError
from certd.kappa.cluster import OUTSIDE, ClusterModel, ClusterParams, assign, cosines
from certd.kappa.learned import EMBED_DIM, Embedder, LearnedKappa, kappa_learned_name
from certd.kappa.steps import DOMAINS, first_step
from certd.ledger.certindex import CertificateIndex

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
    """A fitted model, where it is recorded (-1: not yet) and what it was fitted on."""

    model: ClusterModel
    index: int
    steps: str
    responses: str = ""  # SHA-256 of the verified rollouts (JSON, sorted) it was fitted on


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
            kappa_learned_name(d, model_sha256, p) for p in self._params.values() for d in DOMAINS
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
        from certd.authority.embedder import WEIGHTS, model_dir, sha256_file
        from certd.payloads import task_digest
        from certd.task_object import parse_task_object

        choices: dict[str, tuple[str, float | None]] = {}
        for ts in section.task_sets:
            for i, obj in enumerate(ts.tasks):
                try:
                    task = parse_task_object(obj, stacklevel=3)
                except ValueError as e:
                    raise ConfigError(f"learned_kappa.task_sets[{ts.name}].tasks[{i}]: {e}") from e
                choices[task_digest(task)] = (ts.kappa, ts.distance_threshold)
        return cls(section, choices, sha256_file(model_dir() / WEIGHTS))

    @property
    def names(self) -> tuple[str, ...]:
        """Every learned κ name served here (one per domain and clustering threshold), sorted."""
        return tuple(sorted(self._names))

    def owns(self, kappa: str) -> bool:
        """Whether ``kappa`` is one of the learned κ names served here."""
        return kappa in self._names

    def name_for(self, task_digest: str, domain: str) -> str:
        """The learned κ of a task whose set chose it ("" otherwise)."""
        if self._choices.get(task_digest) != LEARNED or domain not in DOMAINS:
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
                from certd.authority.embedder import StepEmbedder

                self._embedder = StepEmbedder.load(threads=self._cfg.embed_threads, screen="off")
            return self._embedder

    def _recorded(self, key: tuple[str, str], index: CertificateIndex) -> _Known | None:
        """The model recorded in the ledger for (task, κ), else the unrecorded fit, else None."""
        with self._lock:
            known = self._models.get(key)
        if known is not None and known.index >= 0:
            return known
        for i in sorted(index.labels(*key)):
            cert = index.load(i)
            if cert is not None and "clusters" in cert.label_fields:
                fields = cert.label_fields
                params = self._params[key[0]]
                model = ClusterModel.from_json(fields["clusters"], params, dim=EMBED_DIM)
                recorded = _Known(model, i, fields.get("clusters_steps", ""))
                self._remember(key, recorded)
                return recorded
        return known

    def _remember(self, key: tuple[str, str], known: _Known) -> None:
        with self._lock:
            self._models[key] = known
            self._models.move_to_end(key)
            while len(self._models) > self._cfg.max_models:
                self._models.popitem(last=False)

    def _fit(
        self, key: tuple[str, str], domain: str, fields: Mapping[str, str], verify: Verify
    ) -> _Known:
        """Fit the first steps of the verified rollouts a first request carries (or reuse a
        concurrent request's fit)."""
        responses = self._responses(fields)
        distinct = sorted(set(responses))
        correct = _correct(distinct, verify)
        steps = [s for s in (first_step(domain, r) for r in correct) if s]
        cfg = self._cfg
        if len(steps) < cfg.min_fit_steps:
            raise _refuse(
                "CLUSTERS_UNVERIFIED",
                f"label.fields['responses']: {len(correct)} of {len(distinct)} distinct "
                f"rollouts verify CORRECT and {len(steps)} of those write a first step; a fit "
                f"needs at least min_fit_steps={cfg.min_fit_steps}",
            )
        steps = [s[: cfg.max_step_chars] for s in steps]
        params = self._params[key[0]]
        model = LearnedKappa("", self._get_embedder(), params).fit_steps(steps)
        digest = hashlib.sha256(json.dumps(correct, ensure_ascii=False).encode()).hexdigest()
        fitted = _Known(model, -1, json.dumps(sorted(steps), ensure_ascii=False), digest)
        with self._lock:
            known = self._models.get(key)
            if known is not None:
                return known  # a concurrent first request fitted first: one model per key
        self._remember(key, fitted)
        return fitted

    def _responses(self, fields: Mapping[str, str]) -> list[str]:
        """The rollouts a first request carries in ``label.fields['responses']``.

        Raises:
            CertificationRefusedError: none carried (``CLUSTERS_REQUIRED``).
            InvalidInputError: not a JSON array of strings, or over ``max_fit_steps``.
        """
        if "steps" in fields:
            raise InvalidInputError(
                "label.fields['steps'] is not accepted: send the question's rollouts in "
                "label.fields['responses'] (a JSON array of strings); certd verifies them and "
                "clusters the first steps of the correct ones",
                field="label.fields",
            )
        raw = fields.get("responses", "")
        if not raw:
            raise _refuse(
                "CLUSTERS_REQUIRED",
                "no clusters are recorded for this task and κ yet: the first Certify must "
                "carry the question's rollouts in label.fields['responses'] "
                "(a JSON array of strings)",
            )
        try:
            responses = json.loads(raw)
        except ValueError as e:
            raise InvalidInputError(f"label.fields['responses']: {e}", field="label.fields") from e
        if not isinstance(responses, list) or not all(isinstance(r, str) for r in responses):
            raise InvalidInputError(
                "label.fields['responses']: expected a JSON array of strings",
                field="label.fields",
            )
        if len(responses) > self._cfg.max_fit_steps:
            raise InvalidInputError(
                f"label.fields['responses']: at most max_fit_steps={self._cfg.max_fit_steps} "
                f"rollouts, got {len(responses)}",
                field="label.fields",
            )
        return responses

    def label(
        self,
        task_digest: str,
        domain: str,
        kappa: str,
        witness: str,
        fields: Mapping[str, str],
        index: CertificateIndex,
        verify: Verify,
    ) -> LearnedLabel:
        """The witness's family under the learned κ of its task.

        Raises:
            CertificationRefusedError: the task's set did not choose the learned κ
                (``KAPPA_UNKNOWN``), no clusters are recorded and the request carries no
                rollouts (``CLUSTERS_REQUIRED``), or too few of them verify CORRECT
                (``CLUSTERS_UNVERIFIED``).
            InvalidInputError: the rollouts carried are malformed or over the limits.

        Returns:
            The label (with the record's fields) and the gate key ``learned:<label>``.
        """
        if not kappa or self.name_for(task_digest, domain) != kappa:
            raise _refuse(
                "KAPPA_UNKNOWN",
                f"κ {kappa!r} is not chosen for this task (learned_kappa.task_sets)",
            )
        key = (task_digest, kappa)
        known = self._recorded(key, index) or self._fit(key, domain, fields, verify)
        model = known.model
        step = first_step(domain, witness)
        vector = None if step is None else self._get_embedder().embed([step])[0]
        label = assign(model, vector)
        out: dict[str, str] = {"step": step or "", "clusters_digest": model.digest}
        if vector is not None:
            out["cosine"] = f"{max(cosines(model, vector)):.6f}"
        if known.index >= 0:
            out["clusters_index"] = str(known.index)
        else:  # this certificate records the model
            out["clusters"] = model.to_json()
            out["clusters_steps"] = known.steps
            out["clusters_responses"] = known.responses
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
