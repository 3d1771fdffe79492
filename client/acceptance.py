"""Acceptance certificates from the trainer's side: register, evaluate, promote.

Example::

    with CertdClient(address, trusted_keys=[vkey]) as client:
        register_task_set(client, "band-3", tasks3, k=8, route_kappa="countdown.first-op.v1",
                          route_field="operator")
        ratchet = CheckpointRatchet([vkey], run="run-1")
        for step in ("step-0", "step-100"):
            claim = promote_checkpoint(client, ratchet, samplers[step], run="run-1",
                                       checkpoint=step, target="band-3",
                                       checkpoint_digest=digest_of_path(Path("ckpt") / step))
        # PromotionRefusedError names the capability that fell, by how much, with its interval
        ratchet.save_state(Path("ratchet.json"))   # the chain's head outlives the process

certd draws the evaluation prompts (the trainer cannot pick easy ones), verifies every sample
itself and signs only when the target improved and every other registered task set stayed
within its tolerance of the run's previous accepted certificate. ``promote_checkpoint`` then
checks the certificate offline through a ``CheckpointRatchet`` before it returns, fetching
the consistency proofs the ratchet asks for through the client it is given. Every
function has an ``…_async`` twin over ``AsyncCertdClient``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from certd.statements import AcceptanceClaim
from certd.v1 import authority_pb2, tasks_pb2

from .aio import AsyncCertdClient
from .checkpoint_ratchet import CheckpointRatchet, Promotion
from .client import CertdClient
from .errors import PromotionRefusedError
from .tasks import TaskLike, as_task

__all__ = [
    "EvaluationSampler",
    "accept",
    "accept_async",
    "begin_acceptance",
    "begin_acceptance_async",
    "digest_of_path",
    "evaluate_checkpoint",
    "list_acceptances",
    "list_acceptances_async",
    "promote_checkpoint",
    "promote_checkpoint_async",
    "register_task_set",
    "register_task_set_async",
]

EvaluationSampler = Callable[[str, tasks_pb2.Task, int], Sequence[str]]
"""``(task set name, task, k) -> k responses``: the checkpoint under evaluation."""


def digest_of_path(path: Path, chunk_bytes: int = 1 << 20) -> str:
    """Hex SHA-256 identifying a checkpoint on disk: a file's bytes, or a directory's files.

    A directory hashes each regular file's relative path and SHA-256, in sorted order, so the
    digest does not depend on file system order.

    Raises:
        OSError: the path cannot be read.
    """

    def file_digest(p: Path) -> str:
        h = hashlib.sha256()
        with p.open("rb") as f:
            while block := f.read(chunk_bytes):
                h.update(block)
        return h.hexdigest()

    if path.is_file():
        return file_digest(path)
    outer = hashlib.sha256()
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        outer.update(f"{p.relative_to(path).as_posix()}\0{file_digest(p)}\n".encode())
    return outer.hexdigest()


def register_task_set(
    client: CertdClient,
    name: str,
    tasks: Iterable[TaskLike],
    *,
    k: int,
    prompts: int = 0,
    tolerance_best_at_k: float = 0.05,
    tolerance_pass_at_1: float = 0.10,
    min_improvement: float = 0.0,
    route_kappa: str = "math.route.v1",
    route_field: str = "",
) -> authority_pb2.RegisterTaskSetResponse:
    """Register a capability with certd (idempotent for the same set under the same name).

    Raises:
        InvalidRequestError: a bad set, or another set under this name.
        ValueError: a task object is malformed.
    """
    req = _register_request(
        name,
        tasks,
        k=k,
        prompts=prompts,
        tolerance_best_at_k=tolerance_best_at_k,
        tolerance_pass_at_1=tolerance_pass_at_1,
        min_improvement=min_improvement,
        route_kappa=route_kappa,
        route_field=route_field,
    )
    reply: authority_pb2.RegisterTaskSetResponse = client._call(
        client._stubs().authority.RegisterTaskSet, req
    )
    return reply


def begin_acceptance(
    client: CertdClient, run: str, checkpoint: str, checkpoint_digest: str, target: str
) -> authority_pb2.AcceptanceChallenge:
    """Open an evaluation; certd draws the prompts (see ``AcceptanceChallenge``).

    Raises:
        InvalidRequestError: unknown target, bad digest or run.
    """
    req = authority_pb2.BeginAcceptanceRequest(
        run=run, checkpoint=checkpoint, checkpoint_digest=checkpoint_digest, target=target
    )
    reply: authority_pb2.AcceptanceChallenge = client._call(
        client._stubs().authority.BeginAcceptance, req
    )
    return reply


def accept(
    client: CertdClient,
    evaluation_id: str,
    checkpoint_digest: str,
    samples: Mapping[str, Sequence[Sequence[str]]],
) -> authority_pb2.AcceptResponse:
    """Send an evaluation's samples; certd verifies them and decides.

    Args:
        client: the certd client.
        evaluation_id: from ``begin_acceptance``.
        checkpoint_digest: the digest the evaluation was opened for.
        samples: per task set, per prompt (challenge order), k responses.

    Raises:
        NotFoundError: the evaluation is unknown, used or expired.
        InvalidRequestError: the samples do not match the challenge.
    """
    req = _accept_request(evaluation_id, checkpoint_digest, samples)
    reply: authority_pb2.AcceptResponse = client._call(client._stubs().authority.Accept, req)
    return reply


def list_acceptances(
    client: CertdClient, run: str, page_size: int = 0
) -> list[authority_pb2.AcceptanceDecision]:
    """A run's decisions, accepted and refused, in ledger order (every page).

    Args:
        client: the client.
        run: the training run.
        page_size: decisions per call (0: the server's default).

    Raises:
        NotFoundError: the run has no decision.
    """
    req = authority_pb2.ListAcceptancesRequest(run=run, page_size=page_size)
    out: list[authority_pb2.AcceptanceDecision] = []
    while True:
        reply: authority_pb2.ListAcceptancesResponse = client._call(
            client._stubs().authority.ListAcceptances, req
        )
        out.extend(reply.decisions)
        if not reply.next_page_token:
            return out
        req.page_token = reply.next_page_token


def evaluate_checkpoint(
    client: CertdClient,
    sampler: EvaluationSampler,
    *,
    run: str,
    checkpoint: str,
    checkpoint_digest: str,
    target: str,
) -> authority_pb2.AcceptResponse:
    """Begin an acceptance, sample k responses for every drawn prompt, and send them.

    Raises:
        ForkgateError: a certd call failed.
        ValueError: the sampler returned a number of responses other than k.
    """
    challenge = begin_acceptance(client, run, checkpoint, checkpoint_digest, target)
    samples = _samples(challenge, sampler)
    return accept(client, challenge.evaluation_id, checkpoint_digest, samples)


def promote_checkpoint(
    client: CertdClient,
    ratchet: CheckpointRatchet,
    sampler: EvaluationSampler,
    *,
    run: str,
    checkpoint: str,
    checkpoint_digest: str,
    target: str,
) -> AcceptanceClaim:
    """Evaluate a checkpoint through certd and promote it only with a valid certificate.

    Raises:
        PromotionRefusedError: certd refused (``reason`` CAPABILITY_FELL / TARGET_NOT_IMPROVED,
            ``drops`` the capabilities that fell), or the certificate failed the ratchet.
        ForkgateError: a certd call failed.

    Returns:
        The verified claim of the promoted checkpoint.
    """
    reply = evaluate_checkpoint(
        client,
        sampler,
        run=run,
        checkpoint=checkpoint,
        checkpoint_digest=checkpoint_digest,
        target=target,
    )
    if not reply.accepted:
        raise _refused(reply, checkpoint)
    promotion = ratchet.promote(
        checkpoint_digest,
        reply.certificate,
        fetch=lambda a, b: client.consistency_proof(a, b).hashes,
    )
    return _promoted(promotion, checkpoint)


def _register_request(
    name: str, tasks: Iterable[TaskLike], **spec: Any
) -> authority_pb2.RegisterTaskSetRequest:
    return authority_pb2.RegisterTaskSetRequest(
        task_set=authority_pb2.TaskSet(name=name, tasks=[as_task(t) for t in tasks], **spec)
    )


def _accept_request(
    evaluation_id: str, checkpoint_digest: str, samples: Mapping[str, Sequence[Sequence[str]]]
) -> authority_pb2.AcceptRequest:
    return authority_pb2.AcceptRequest(
        evaluation_id=evaluation_id,
        checkpoint_digest=checkpoint_digest,
        evaluation=[
            authority_pb2.TaskSetSamples(
                task_set=name,
                prompts=[authority_pb2.PromptSamples(responses=list(r)) for r in per_prompt],
            )
            for name, per_prompt in samples.items()
        ],
    )


def _samples(
    challenge: authority_pb2.AcceptanceChallenge, sampler: EvaluationSampler
) -> dict[str, list[list[str]]]:
    samples: dict[str, list[list[str]]] = {}
    for ep in challenge.sets:
        rows = []
        for task in ep.prompts:
            got = list(sampler(ep.task_set, task, ep.k))
            if len(got) != ep.k:
                raise ValueError(
                    f"sampler returned {len(got)} responses for {ep.task_set}, k={ep.k}"
                )
            rows.append(got)
        samples[ep.task_set] = rows
    return samples


def _refused(reply: authority_pb2.AcceptResponse, checkpoint: str) -> PromotionRefusedError:
    r = reply.refusal
    return PromotionRefusedError(
        f"certd refused {checkpoint}: {r.detail}", reason=r.reason, drops=tuple(r.drops)
    )


def _promoted(promotion: Promotion, checkpoint: str) -> AcceptanceClaim:
    if not promotion.promoted or promotion.claim is None:
        first = promotion.reasons[0] if promotion.reasons else ("NO_CERTIFICATE", "")
        raise PromotionRefusedError(
            f"{checkpoint}: acceptance certificate did not pass the ratchet: {promotion.reasons}",
            reason=str(first[0]),
        )
    return promotion.claim


# The same over ``AsyncCertdClient`` (sampling stays a plain call: it is the trainer's work).


async def register_task_set_async(
    client: AsyncCertdClient,
    name: str,
    tasks: Iterable[TaskLike],
    *,
    k: int,
    prompts: int = 0,
    tolerance_best_at_k: float = 0.05,
    tolerance_pass_at_1: float = 0.10,
    min_improvement: float = 0.0,
    route_kappa: str = "math.route.v1",
    route_field: str = "",
) -> authority_pb2.RegisterTaskSetResponse:
    """``register_task_set`` over the async client (the same defaults)."""
    req = _register_request(
        name,
        tasks,
        k=k,
        prompts=prompts,
        tolerance_best_at_k=tolerance_best_at_k,
        tolerance_pass_at_1=tolerance_pass_at_1,
        min_improvement=min_improvement,
        route_kappa=route_kappa,
        route_field=route_field,
    )
    reply: authority_pb2.RegisterTaskSetResponse = await client._call(
        client._stubs().authority.RegisterTaskSet, req
    )
    return reply


async def begin_acceptance_async(
    client: AsyncCertdClient, run: str, checkpoint: str, checkpoint_digest: str, target: str
) -> authority_pb2.AcceptanceChallenge:
    """``begin_acceptance`` over the async client."""
    req = authority_pb2.BeginAcceptanceRequest(
        run=run, checkpoint=checkpoint, checkpoint_digest=checkpoint_digest, target=target
    )
    reply: authority_pb2.AcceptanceChallenge = await client._call(
        client._stubs().authority.BeginAcceptance, req
    )
    return reply


async def accept_async(
    client: AsyncCertdClient,
    evaluation_id: str,
    checkpoint_digest: str,
    samples: Mapping[str, Sequence[Sequence[str]]],
) -> authority_pb2.AcceptResponse:
    """``accept`` over the async client."""
    reply: authority_pb2.AcceptResponse = await client._call(
        client._stubs().authority.Accept, _accept_request(evaluation_id, checkpoint_digest, samples)
    )
    return reply


async def list_acceptances_async(
    client: AsyncCertdClient, run: str
) -> list[authority_pb2.AcceptanceDecision]:
    """``list_acceptances`` over the async client (every page)."""
    req = authority_pb2.ListAcceptancesRequest(run=run)
    out: list[authority_pb2.AcceptanceDecision] = []
    while True:
        reply: authority_pb2.ListAcceptancesResponse = await client._call(
            client._stubs().authority.ListAcceptances, req
        )
        out.extend(reply.decisions)
        if not reply.next_page_token:
            return out
        req.page_token = reply.next_page_token


async def promote_checkpoint_async(
    client: AsyncCertdClient,
    ratchet: CheckpointRatchet,
    sampler: EvaluationSampler,
    *,
    run: str,
    checkpoint: str,
    checkpoint_digest: str,
    target: str,
) -> AcceptanceClaim:
    """``promote_checkpoint`` over the async client.

    Raises:
        PromotionRefusedError: as ``promote_checkpoint``.
    """
    challenge = await begin_acceptance_async(client, run, checkpoint, checkpoint_digest, target)
    samples = _samples(challenge, sampler)
    reply = await accept_async(client, challenge.evaluation_id, checkpoint_digest, samples)
    if not reply.accepted:
        raise _refused(reply, checkpoint)
    proofs: dict[tuple[int, int], list[bytes]] = {}
    promotion = ratchet.promote(checkpoint_digest, reply.certificate)
    while promotion.missing is not None and promotion.missing not in proofs:
        a, b = promotion.missing  # the ratchet decides without I/O; the caller fetches
        proofs[(a, b)] = list((await client.consistency_proof(a, b)).hashes)
        promotion = ratchet.promote(checkpoint_digest, reply.certificate, proofs=proofs)
    return _promoted(promotion, checkpoint)
