"""Acceptance certificates: a checkpoint moves forward only when it keeps what came before.

Example (see tests/integration/test_acceptance_service.py for a running server)::

    acceptances = Acceptances(checkers, ledger, signer, cfg.acceptance)
    acceptances.register(spec, checked_tasks)          # a capability: tasks, k, tolerances
    challenge = acceptances.begin("run-1", "step-100", weights_sha256, target="band-a")
    # the trainer samples k responses for every prompt of challenge.sets
    decision = acceptances.accept(challenge.evaluation_id, weights_sha256, samples).value
    decision.accepted, decision.reason  # and, on the Proven, .checkpoint and .proof

certd draws the evaluation prompts itself (a seed from the OS's CSPRNG, recorded in the
certificate), verifies every sample through the domain checkers, computes the support figures of
every registered task set (``certd.effective_support``) and signs an acceptance certificate only
when the target's pass@1 rose by more than its ``min_improvement`` and no other task set's
best@k or pass@1 fell by more than its tolerance from the run's previous accepted certificate,
nor from the run's first (baseline) certificate, so small falls cannot add up unseen. The point
estimate decides; each drop carries its bootstrap interval, and with ``refuse_within_noise`` off
a fall whose interval still contains 0 passes as sampling noise. The first certificate of a run
is its baseline (nothing to compare). Certificates chain: each names its predecessor's
certificate id, and the ledger key ``acceptance/<run>/<sequence>`` makes a second certificate
for the same place in the chain impossible. A refusal names every capability that fell, by how
much, with the bootstrap interval of the change; it is signed and logged too (predicate type
``…/acceptance-refusal/v1``, key ``acceptance-refusal/<run>/<evaluation>``), so the ledger holds
every decision, but a refusal record never verifies as a certificate. The keys are the ledger's
(``certd.ledger.acceptancekeys`` builds them and reads the decisions back).

The rules (which falls count) are ``certd.authority.regressions``; what a decision is, the
checks of the samples and the predicates it is signed as, ``certd.authority.acceptance_records``.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from certd.authority.acceptance_records import (
    AcceptanceDecision,
    Capability,
    Challenge,
    DecisionPage,
    Drop,
    TaskSetSpec,
    check_digest,
    check_run,
    check_samples,
    decision_of,
    decision_predicate,
    describe_drop,
    parse_acceptance_entry,
    refusal_reason,
    spec_json,
)
from certd.authority.checker import Checkers
from certd.authority.regressions import compare, find_drops
from certd.authority.results import CheckedTask, Proven, proven
from certd.config import AcceptanceConfig
from certd.domains.verdict import Status, Verdict
from certd.effective_support import (
    PromptOutcome,
    support_figures,
)
from certd.errors import InvalidInputError, LimitExceededError, NotFoundError
from certd.ledger.acceptancekeys import acceptance_key, decision_entries, refusal_key
from certd.ledger.log import Ledger
from certd.payloads import sha256_hex
from certd.signing.dsse import sign_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, canonical_json, make_statement
from certd.signing.keys import SigningKey

__all__ = [
    "AcceptanceDecision",
    "Acceptances",
    "Capability",
    "Challenge",
    "DecisionPage",
    "Drop",
    "TaskSetSpec",
    "parse_acceptance_entry",
]


@dataclass(frozen=True, slots=True)
class _TaskSet:
    spec: TaskSetSpec
    tasks: tuple[CheckedTask, ...]
    digest: str


@dataclass
class _Run:
    baseline: AcceptanceDecision | None = None
    head: AcceptanceDecision | None = None
    decisions: list[AcceptanceDecision] = field(default_factory=list)


class Acceptances:
    """Registered capabilities, open evaluations and the chain of accepted checkpoints per run.

    Thread-safe: one lock guards the registry and chains; sample verification runs outside it,
    and a decision is re-checked against the run's head before it is written.
    """

    def __init__(
        self,
        checkers: Checkers,
        ledger: Ledger,
        signer: SigningKey,
        cfg: AcceptanceConfig,
        *,
        clock: Callable[[], float] = time.time,
        seeds: Callable[[], int] = lambda: secrets.randbits(63),
    ) -> None:
        self._checkers = checkers
        self._ledger = ledger
        self._signer = signer
        self._cfg = cfg
        self._clock = clock
        self._seeds = seeds
        self._lock = threading.Lock()
        self._sets: dict[str, _TaskSet] = {}
        self._open: dict[str, Challenge] = {}
        self._runs: dict[str, _Run] = {}
        self._scan_lock = threading.Lock()
        self._scanned = 0
        self._known: set[int] = set()  # decisions written here past the scan
        self._load()

    # ---- registry ----

    def register(self, spec: TaskSetSpec, tasks: Sequence[CheckedTask]) -> tuple[str, bool]:
        """Register a capability; re-registering the same set under its name is a no-op.

        Raises:
            InvalidInputError: a bad spec, or a different set under a registered name.
            LimitExceededError: too many sets or tasks.

        Returns:
            (task set digest, existing).
        """
        if not spec.name or len(spec.name) > 128:
            raise InvalidInputError("task_set.name: expected 1..128 characters", field="name")
        if not tasks:
            raise InvalidInputError("task_set.tasks: expected at least one task", field="tasks")
        if len(tasks) > self._cfg.max_tasks_per_set:
            raise LimitExceededError(
                f"task_set.tasks: at most {self._cfg.max_tasks_per_set}, got {len(tasks)}",
                field="tasks",
            )
        if spec.k < 1 or spec.prompts < 0 or spec.prompts > len(tasks):
            raise InvalidInputError(
                f"task_set: expected k >= 1 and 0 <= prompts <= {len(tasks)}, "
                f"got k={spec.k}, prompts={spec.prompts}",
                field="k",
            )
        for name in ("tolerance_best_at_k", "tolerance_pass_at_1", "min_improvement"):
            value = getattr(spec, name)
            if not 0.0 <= value <= 1.0:
                raise InvalidInputError(f"task_set.{name}: expected 0..1, got {value}", field=name)
        for t in tasks:
            self._checkers.for_domain(t.domain)  # UnsupportedError for a domain not served
        digests = [t.digest for t in tasks]
        if len(set(digests)) != len(digests):
            raise InvalidInputError("task_set.tasks: a task appears twice", field="tasks")
        digest = sha256_hex(canonical_json({"spec": spec_json(spec), "tasks": digests}))
        with self._lock:
            old = self._sets.get(spec.name)
            if old is not None:
                if old.digest != digest:
                    raise InvalidInputError(
                        f"task set {spec.name!r} is registered with digest {old.digest[:16]}…, "
                        f"got {digest[:16]}…",
                        field="name",
                    )
                return digest, True
            per_eval = sum(t.spec.k * len(_draw(t, 0)) for t in self._sets.values())
            mine = spec.k * (spec.prompts or len(tasks))
            if per_eval + mine > self._cfg.max_samples_per_accept:
                raise LimitExceededError(
                    f"task_set: an evaluation of every set would take {per_eval + mine} samples, "
                    f"at most {self._cfg.max_samples_per_accept}",
                    field="task_set.k",
                )
            if len(self._sets) >= self._cfg.max_task_sets:
                raise LimitExceededError(
                    f"task sets: at most {self._cfg.max_task_sets}", field="task_set"
                )
            self._sets[spec.name] = _TaskSet(spec, tuple(tasks), digest)
        return digest, False

    @property
    def task_sets(self) -> tuple[str, ...]:
        """The registered task set names, in registration order."""
        with self._lock:
            return tuple(self._sets)

    # ---- the flow ----

    def begin(self, run: str, checkpoint: str, checkpoint_digest: str, target: str) -> Challenge:
        """Open an evaluation: draw every registered set's prompts with a fresh seed.

        Raises:
            InvalidInputError: a bad run, checkpoint digest or target; no task set registered.
            LimitExceededError: too many open evaluations.

        Returns:
            The challenge (its prompts are what ``accept`` expects samples for).
        """
        check_run(run)
        check_digest(checkpoint_digest)
        seed = self._seeds()
        now = self._clock()
        if self._ledger.store.shared:  # the run's head may have moved on another replica
            self.catch_up(refresh=True)
        with self._lock:
            if not self._sets:
                raise InvalidInputError("no task set is registered", field="target")
            if target not in self._sets:
                raise InvalidInputError(
                    f"target: expected one of {sorted(self._sets)}, got {target!r}", field="target"
                )
            self._expire(now)
            if len(self._open) >= self._cfg.max_open_evaluations:
                raise LimitExceededError(
                    f"open evaluations: at most {self._cfg.max_open_evaluations}",
                    field="evaluation",
                )
            state = self._runs.setdefault(run, _Run())
            head = state.head
            sets = tuple(
                (name, ts.spec.k, _draw(ts, seed)) for name, ts in sorted(self._sets.items())
            )
            challenge = Challenge(
                evaluation_id=secrets.token_hex(16),
                run=run,
                checkpoint=checkpoint,
                checkpoint_digest=checkpoint_digest,
                target=target,
                seed=seed,
                predecessor=head.certificate_id if head is not None else "",
                sequence=head.sequence + 1 if head is not None else 0,
                sets=sets,
                opened_at=now,
            )
            self._open[challenge.evaluation_id] = challenge
        return challenge

    def accept(
        self,
        evaluation_id: str,
        checkpoint_digest: str,
        samples: Mapping[str, Sequence[Sequence[str]]],
        timeout_s: float | None = None,
    ) -> Proven[AcceptanceDecision]:
        """Verify an evaluation's samples, decide, sign and log the decision.

        Args:
            evaluation_id: from ``begin``.
            checkpoint_digest: must equal the one the evaluation was opened for.
            samples: per task set name, per prompt (challenge order), exactly k responses.
            timeout_s: how long to wait for the ledger write.

        Raises:
            NotFoundError: no such open evaluation (unknown, expired or used).
            InvalidInputError: the samples do not match the challenge.
            LimitExceededError: more samples than ``max_samples_per_accept``.
            LedgerError: the ledger write failed (nothing was accepted).

        Returns:
            The decision (the refusal is a decision too, not an error) with its inclusion
            proof in the latest checkpoint.
        """
        with self._lock:
            self._expire(self._clock())
            challenge = self._open.pop(evaluation_id, None)
        if challenge is None:
            raise NotFoundError(f"no open evaluation {evaluation_id!r} (unknown, used or expired)")
        if checkpoint_digest != challenge.checkpoint_digest:
            raise InvalidInputError(
                f"checkpoint_digest: expected {challenge.checkpoint_digest}, got "
                f"{checkpoint_digest}",
                field="checkpoint_digest",
            )
        check_samples(challenge, samples, self._cfg.max_samples_per_accept)
        capabilities = [
            self._evaluate(name, k, prompts, samples[name]) for name, k, prompts in challenge.sets
        ]
        if self._ledger.store.shared:
            self.catch_up(refresh=True)
        with self._lock:
            decision = self._decide(challenge, capabilities, timeout_s)
        return proven(self._ledger, [decision])[0]

    def _decide(
        self, challenge: Challenge, capabilities: Sequence[Capability], timeout_s: float | None
    ) -> AcceptanceDecision:
        """Compare with the run's chain, sign and log the decision (caller holds ``_lock``)."""
        state = self._runs.setdefault(challenge.run, _Run())
        head = state.head
        if (head.certificate_id if head is not None else "") != challenge.predecessor:
            raise InvalidInputError(
                "the run accepted another checkpoint since this evaluation began; begin a new one",
                field="evaluation_id",
            )
        caps = tuple(compare(c, head, self._cfg) for c in capabilities)
        specs = {name: ts.spec for name, ts in self._sets.items()}
        drops = find_drops(
            challenge.run, challenge.target, caps, head, state.baseline, specs, self._cfg
        )
        reason = ",".join(sorted({refusal_reason(d) for d in drops}))  # "" when none fell
        detail = "; ".join(describe_drop(d) for d in drops)
        if drops:
            envelope = self._sign(challenge, caps, (reason, detail, drops))
            key = refusal_key(challenge.run, challenge.evaluation_id)
        else:
            envelope = self._sign(challenge, caps)
            key = acceptance_key(challenge.run, challenge.sequence)
        index = self._ledger.submit(key, envelope).result(timeout=timeout_s)
        decision = decision_of(
            challenge,
            caps,
            index,
            envelope,
            accepted=not drops,
            reason=reason,
            detail=detail,
            drops=tuple(drops),
        )
        self._record(decision)
        return decision

    def decisions(self, run: str, *, after: int = -1, limit: int | None = None) -> DecisionPage:
        """A run's decisions, accepted and refused, in ledger order, a page at a time, each
        with its inclusion proof (all in the latest checkpoint).

        Args:
            run: the run.
            after: only decisions at a ledger index above this one (the previous page's
                ``next_after``).
            limit: the page size, or None for every decision.

        Raises:
            NotFoundError: the run has no decision.
        """
        if self._ledger.store.shared:  # decisions other replicas wrote count too
            self.catch_up(refresh=True)
        with self._lock:
            state = self._runs.get(run)
            if state is None or not state.decisions:
                raise NotFoundError(f"run {run!r} has no acceptance decision")
            later = [d for d in state.decisions if d.index > after]
        page = later if limit is None else later[:limit]
        more = limit is not None and len(later) > limit
        return DecisionPage(run, proven(self._ledger, page), page[-1].index if more else None)

    # ---- internals ----

    def _expire(self, now: float) -> None:
        ttl = self._cfg.evaluation_ttl_s
        for key in [k for k, c in self._open.items() if now - c.opened_at > ttl]:
            del self._open[key]

    def _evaluate(
        self,
        name: str,
        k: int,
        prompts: Sequence[CheckedTask],
        samples: Sequence[Sequence[str]],
    ) -> Capability:
        """Verify every sample of one task set and compute its figures."""
        spec = self._sets[name].spec
        outcomes: list[PromptOutcome] = []
        routes: list[str] = []
        families: list[str] = []
        for task, responses in zip(prompts, samples, strict=True):
            checker = self._checkers.for_domain(task.domain)
            verdicts = checker.verify_batch([(task.value, r) for r in responses])
            route_kappa = spec.route_kappa or checker.kappa
            correct = 0
            for v in verdicts:
                correct += v.status is Status.CORRECT
                routes.append(_route(v, route_kappa, spec.route_field))
                families.append(v.family.label if v.family is not None else "none")
            outcomes.append(PromptOutcome(task.digest, len(verdicts), correct))
        figures = support_figures(outcomes, k, routes=routes, families=families)
        return Capability(name, figures, tuple(outcomes))

    def _sign(
        self,
        challenge: Challenge,
        caps: Sequence[Capability],
        refusal: tuple[str, str, Sequence[Drop]] | None = None,
    ) -> bytes:
        """The signed acceptance certificate, or (with ``refusal``) the signed refusal record."""
        verifiers = {
            self._checkers.for_domain(t.domain).verifier for _, _, ps in challenge.sets for t in ps
        }
        sets = {
            c.task_set: (self._sets[c.task_set].digest, self._sets[c.task_set].spec) for c in caps
        }
        kind, predicate = decision_predicate(
            challenge, caps, sets, sorted(verifiers), int(self._clock()), refusal
        )
        statement = make_statement([("checkpoint", challenge.checkpoint_digest)], kind, predicate)
        return sign_envelope(statement, IN_TOTO_PAYLOAD_TYPE, self._signer).to_json()

    def catch_up(self, *, refresh: bool = False) -> None:
        """Add decisions other replicas appended to a shared ledger since the last scan.

        Args:
            refresh: first adopt the newest checkpoint in the shared store now.

        Raises:
            StoreError: the ledger's store failed.
        """
        if refresh and self._ledger.store.shared:
            self._ledger.refresh()
        self._load()

    def _load(self) -> None:
        """Index every run's chain from the ledger entries not scanned yet.

        At start-up this rebuilds the chains (certd restarts keep the ratchet); later calls
        add what other replicas of a shared ledger appended. Decisions this process wrote
        itself are skipped (``_known``).
        """
        with self._scan_lock:
            size = self._ledger.size()
            # The first load reads only the entries appended under a decision key.
            for at, entry in decision_entries(self._ledger, self._scanned, size):
                self._record_entry(at, entry)
            with self._lock:
                self._scanned = max(self._scanned, size)
                self._known = {i for i in self._known if i >= self._scanned}

    def _record_entry(self, index: int, entry: bytes) -> None:
        decision = parse_acceptance_entry(index, entry)
        if decision is not None:
            with self._lock:
                self._record(decision)

    def _record(self, decision: AcceptanceDecision) -> None:
        """Place a decision in its run's chain in ledger order (caller holds ``_lock``)."""
        if decision.index in self._known or (
            decision.index < self._scanned and decision.index >= 0
        ):
            return
        if decision.index >= self._scanned:
            self._known.add(decision.index)
        state = self._runs.setdefault(decision.run, _Run())
        at = len(state.decisions)
        while at > 0 and state.decisions[at - 1].index > decision.index:
            at -= 1
        state.decisions.insert(at, decision)
        if decision.accepted:
            if state.head is None or state.head.index < decision.index:
                state.head = decision
            if state.baseline is None or state.baseline.index > decision.index:
                state.baseline = decision


def _draw(ts: _TaskSet, seed: int) -> tuple[CheckedTask, ...]:
    """The evaluation prompts of a set: a seeded sample, or every task in order."""
    m = ts.spec.prompts
    if m == 0 or m >= len(ts.tasks):
        return ts.tasks
    rng = random.Random(f"{seed}/{ts.spec.name}")
    return tuple(ts.tasks[i] for i in sorted(rng.sample(range(len(ts.tasks)), m)))


def _route(verdict: Verdict, kappa: str, field_name: str) -> str:
    family = verdict.label_for(kappa)
    if family is None:
        return "none"
    if field_name:
        return family.fields.get(field_name, "none")
    return family.label
