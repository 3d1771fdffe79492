"""The acceptance RPCs of the Authority service: RegisterTaskSet, BeginAcceptance, Accept,
ListAcceptances (the decisions are ``certd.authority.acceptances``, which returns each with its
inclusion proof: the servicer reads no ledger). A task set's tasks go through the one
``TaskCache`` every RPC shares (``certd.service.taskcache``), like the tasks of Verify and Certify.

Example::

    class AuthorityServicer(AcceptanceMethods, authority_pb2_grpc.AuthorityServicer): ...
    register_configured(acceptances, cfg, tasks)  # the task sets of cfg.acceptance, at start-up
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from certd.authority.acceptances import (
    AcceptanceDecision,
    Acceptances,
    Capability,
    Drop,
    TaskSetSpec,
)
from certd.authority.results import CheckedTask, Proven
from certd.config import CertdConfig, TaskSetConfig
from certd.effective_support import Interval
from certd.errors import ConfigError, InvalidInputError, LimitExceededError
from certd.service.convert import proof_to_pb
from certd.service.paging import make_token, page_size, read_token
from certd.service.taskcache import TaskCache
from certd.task_object import parse_task_object
from certd.v1 import authority_pb2

__all__ = ["AcceptanceMethods", "decision_to_pb", "register_configured"]


def _spec_of(pb: authority_pb2.TaskSet) -> TaskSetSpec:
    return TaskSetSpec(
        name=pb.name,
        k=pb.k,
        prompts=pb.prompts,
        tolerance_best_at_k=pb.tolerance_best_at_k,
        tolerance_pass_at_1=pb.tolerance_pass_at_1,
        min_improvement=pb.min_improvement,
        route_kappa=pb.route_kappa,
        route_field=pb.route_field,
    )


def register_configured(acceptances: Acceptances, cfg: CertdConfig, tasks: TaskCache) -> None:
    """Register the task sets of ``cfg.acceptance`` (server start-up), converting their tasks
    through ``tasks`` (the cache the RPCs share).

    Raises:
        ConfigError: a configured task or set is invalid.
    """
    for ts in cfg.acceptance.task_sets:
        try:
            pb = _task_set_pb(ts)
            acceptances.register(_spec_of(pb), _checked_tasks(pb, tasks))
        except InvalidInputError as e:
            raise ConfigError(f"acceptance.task_sets[{ts.name}]: {e}") from e


def _task_set_pb(ts: TaskSetConfig) -> authority_pb2.TaskSet:
    tasks = []
    for i, obj in enumerate(ts.tasks):
        try:
            tasks.append(parse_task_object(obj, stacklevel=3))
        except ValueError as e:
            raise InvalidInputError(f"tasks[{i}]: {e}", field="tasks") from e
    return authority_pb2.TaskSet(
        name=ts.name,
        tasks=tasks,
        k=ts.k,
        prompts=ts.prompts,
        tolerance_best_at_k=ts.tolerance_best_at_k,
        tolerance_pass_at_1=ts.tolerance_pass_at_1,
        min_improvement=ts.min_improvement,
        route_kappa=ts.route_kappa,
        route_field=ts.route_field,
    )


def _checked_tasks(pb: authority_pb2.TaskSet, tasks: TaskCache) -> list[CheckedTask]:
    return [tasks.get(t, f"task_set.tasks[{i}]") for i, t in enumerate(pb.tasks)]


def _interval_pb(iv: Interval | None) -> authority_pb2.Interval | None:
    if iv is None:
        return None
    return authority_pb2.Interval(estimate=iv.estimate, low=iv.low, high=iv.high, level=iv.level)


def _figures_pb(cap: Capability) -> authority_pb2.CapabilityFigures:
    f = cap.figures
    ch = cap.change
    return authority_pb2.CapabilityFigures(
        task_set=cap.task_set,
        k=f.k,
        prompts=f.prompts,
        best_at_k=f.best_at_k,
        pass_at_1=f.pass_at_1,
        all_correct=f.all_correct,
        mixed=f.mixed,
        all_wrong=f.all_wrong,
        routes=f.routes,
        families=f.families,
        has_previous=ch is not None,
        best_at_k_change=_interval_pb(ch.best_at_k if ch else None),
        pass_at_1_change=_interval_pb(ch.pass_at_1 if ch else None),
        ser=_interval_pb(ch.ser if ch else None),
        within_noise=ch.within_noise if ch else False,
    )


def _drop_pb(d: Drop) -> authority_pb2.CapabilityDrop:
    return authority_pb2.CapabilityDrop(
        task_set=d.task_set,
        metric=d.metric,
        previous=d.previous,
        now=d.now,
        drop=d.drop,
        interval=_interval_pb(d.interval),
        tolerance=d.tolerance,
        against=d.against,
    )


def decision_to_pb(proven: Proven[AcceptanceDecision]) -> authority_pb2.AcceptanceDecision:
    """A decision as a wire message, with the inclusion proof the authority returned with it."""
    d = proven.value
    out = authority_pb2.AcceptanceDecision(
        run=d.run,
        checkpoint=d.checkpoint,
        checkpoint_digest=d.checkpoint_digest,
        target=d.target,
        accepted=d.accepted,
        figures=[_figures_pb(c) for c in d.capabilities],
    )
    signed = authority_pb2.AcceptanceCertificate(
        envelope=d.envelope,
        certificate_id=d.certificate_id,
        ledger_index=d.index,
        inclusion=proof_to_pb(d.index, d.envelope, proven.checkpoint, proven.proof),
    )
    if d.accepted:
        out.certificate.CopyFrom(signed)
    else:
        out.refusal.CopyFrom(
            authority_pb2.AcceptanceRefusal(
                reason=d.reason,
                detail=d.detail,
                drops=[_drop_pb(x) for x in d.drops],
                record=signed,
            )
        )
    return out


class AcceptanceMethods:
    """The acceptance RPCs; mixed into ``AuthorityServicer`` (which sets the attributes)."""

    _cfg: CertdConfig
    _acceptances: Acceptances
    _tasks: TaskCache

    def RegisterTaskSet(
        self, request: authority_pb2.RegisterTaskSetRequest, context: grpc.ServicerContext
    ) -> authority_pb2.RegisterTaskSetResponse:
        pb = request.task_set
        if len(pb.tasks) > self._cfg.acceptance.max_tasks_per_set:
            raise LimitExceededError(
                f"task_set.tasks: at most {self._cfg.acceptance.max_tasks_per_set}, "
                f"got {len(pb.tasks)}",
                field="task_set.tasks",
            )
        digest, existing = self._acceptances.register(_spec_of(pb), _checked_tasks(pb, self._tasks))
        return authority_pb2.RegisterTaskSetResponse(task_set_digest=digest, existing=existing)

    def BeginAcceptance(
        self, request: authority_pb2.BeginAcceptanceRequest, context: grpc.ServicerContext
    ) -> authority_pb2.AcceptanceChallenge:
        c = self._acceptances.begin(
            request.run, request.checkpoint, request.checkpoint_digest, request.target
        )
        return authority_pb2.AcceptanceChallenge(
            evaluation_id=c.evaluation_id,
            seed=c.seed,
            predecessor=c.predecessor,
            sets=[
                authority_pb2.EvaluationPrompts(task_set=name, k=k, prompts=[t.pb for t in ps])
                for name, k, ps in c.sets
            ],
        )

    def Accept(
        self, request: authority_pb2.AcceptRequest, context: grpc.ServicerContext
    ) -> authority_pb2.AcceptResponse:
        samples: dict[str, Sequence[Sequence[str]]] = {}
        for ts in request.evaluation:
            if ts.task_set in samples:
                raise InvalidInputError(
                    f"evaluation: task set {ts.task_set!r} appears twice", field="evaluation"
                )
            samples[ts.task_set] = [list(p.responses) for p in ts.prompts]
        d = self._acceptances.accept(request.evaluation_id, request.checkpoint_digest, samples)
        pb = decision_to_pb(d)
        return authority_pb2.AcceptResponse(
            accepted=pb.accepted,
            certificate=pb.certificate if pb.accepted else None,
            refusal=pb.refusal if not pb.accepted else None,
            figures=pb.figures,
        )

    def ListAcceptances(
        self, request: authority_pb2.ListAcceptancesRequest, context: grpc.ServicerContext
    ) -> authority_pb2.ListAcceptancesResponse:
        size = page_size(request.page_size, self._cfg.limits)
        query = f"acceptances\n{request.run}"
        after = read_token(request.page_token, query)
        try:
            start = -1 if after is None else int(after)
        except ValueError as e:
            raise InvalidInputError("page_token: malformed", field="page_token") from e
        page = self._acceptances.decisions(request.run, after=start, limit=size)
        more = page.next_after is not None
        return authority_pb2.ListAcceptancesResponse(
            decisions=[decision_to_pb(d) for d in page.decisions],
            next_page_token=make_token(query, str(page.next_after)) if more else "",
        )
