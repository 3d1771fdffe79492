"""Scoring rollouts through certd for the trainer adapters (no framework imports).

Example::

    scorer = Scorer("127.0.0.1:50051", trusted_keys=[vkey])
    scored = await scorer.score([task, task], ["(25-5)*4+3", "83"])
    scored[0].reward, scored[0].family, scored[0].question   # 1.0, "25,-", <task digest>

An infrastructure failure (an INFRA_ERROR verdict, or certd unreachable, past its deadline,
over a limit or failing server-side) gives ``reward=None``: the row is left out, never
scored as a wrong answer. A receipt that does not verify raises ``VerificationError``: that is
a trust failure, not an outage, and training must not go on silently.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from certd.signing.dsse import KeyRing
from certd.signing.keys import VerifierKey
from certd.statements import task_digest
from certd.v1 import tasks_pb2, verifier_pb2

from .._base import VerifyItem
from .._channel import ClientSettings
from ..aio import AsyncCertdClient
from ..client import CertdClient
from ..connection import Connection, split_addresses
from ..errors import (
    CertdUnavailableError,
    DeadlineExceededError,
    ResourceExhaustedError,
    ServerError,
)
from ..groups import group_records
from ..ratchet import Admission, Ratchet
from ..tasks import as_task

__all__ = ["INFRA_ERRORS", "Scored", "Scorer", "admit_groups", "parse_task"]

# Failures of the path to certd, not of the rollout: the rows are left out.
INFRA_ERRORS = (CertdUnavailableError, DeadlineExceededError, ResourceExhaustedError, ServerError)


@dataclass(frozen=True, slots=True)
class Scored:
    """One rollout's outcome.

    Attributes:
        reward: the verdict's reward, or None on an infrastructure failure.
        family: the κ label value ("" when the verifier gave none), None on a failure.
        status: the verdict status name, or ``"INFRA_ERROR"`` when certd could not answer.
        question: the task digest (the question part of the stratified key).
        verdict: the verdict (None when certd could not answer).
        receipt: the receipt covering the verdict (None when certd could not answer).
        response: the response text verified.
        task: the task it was verified against.
    """

    reward: float | None
    family: str | None
    status: str
    question: str
    verdict: verifier_pb2.Verdict | None = None
    receipt: verifier_pb2.Receipt | None = None
    response: str = ""
    task: tasks_pb2.Task | None = None


def parse_task(task: Any) -> tasks_pb2.Task:
    """A task from a Task, a mapping, or its JSON text (as dataset columns carry it).

    Raises:
        InvalidRequestError: the task is malformed (from ``as_task``).
        ValueError: the text is not JSON.
    """
    if isinstance(task, str | bytes):
        task = json.loads(task)
    return as_task(task)


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, or the last message of a conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


class Scorer:
    """Verifies rollouts through certd, one AsyncCertdClient per event loop.

    Args:
        address: certd's host:port, several replicas' IP:port (a list or comma-separated),
            or a ``Connection`` (TLS, client certificate, token); settings a string or list
            leaves unset come from the ``FORKGATE_*`` environment (``forkgate.connection``).
        trusted_keys: log keys; with them every receipt is checked offline.
        settings: client settings (timeouts, retries, batch size).
        linger_s: how long ``score_one`` waits for more calls to share its VerifyBatch.
    """

    def __init__(
        self,
        address: str | Sequence[str] | Connection,
        *,
        trusted_keys: KeyRing | Iterable[str | Path | VerifierKey] | None = None,
        settings: ClientSettings | None = None,
        linger_s: float = 0.02,
    ) -> None:
        self.connection = (
            address
            if isinstance(address, Connection)
            else Connection.from_env(addresses=split_addresses(address))
        )
        self.trusted_keys = trusted_keys
        self.settings = settings or ClientSettings()
        self.linger_s = linger_s
        self._client: AsyncCertdClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[Any, str, asyncio.Future[Scored]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task[None]] = set()
        self._sync: CertdClient | None = None

    def consistency(self, first: int, second: int) -> list[bytes]:
        """A consistency proof between two tree sizes, from certd (a ratchet's source).

        The adapters give a ``Ratchet`` built without ``consistency=`` this method, so the
        ratchet can move its trusted checkpoint forward as the log grows (step 2 on).

        Raises:
            CertdUnavailableError, DeadlineExceededError: certd cannot be reached.
            ForkgateError: certd could not give the proof.
        """
        if self._sync is None:
            self._sync = self.connection.client(
                trusted_keys=self.trusted_keys, settings=self.settings
            )
        return list(self._sync.consistency_proof(first, second).hashes)

    def bind(self, ratchet: Ratchet) -> Ratchet:
        """Give ``ratchet`` this scorer's certd as its consistency source, unless it has one."""
        if ratchet.consistency is None:
            ratchet.consistency = self.consistency
        return ratchet

    def client(self) -> AsyncCertdClient:
        """The client of the running loop (a gRPC aio channel belongs to one loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self.connection.aio_client(
                trusted_keys=self.trusted_keys, settings=self.settings
            )
            self._loop = loop
            self._pending, self._timer = [], None
        return self._client

    async def score_one(self, task: Any, response: str) -> Scored:
        """Score one response, coalesced with the calls of the next ``linger_s`` seconds.

        Frameworks that score row by row (verl) would otherwise make certd sign one receipt
        and append one ledger entry per rollout; calls made together share one VerifyBatch
        (at most ``settings.batch_size`` rollouts).

        Raises:
            The errors of ``score``, for every call of the batch.
        """
        self.client()  # binds the pending batch to this loop
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Scored] = loop.create_future()
        self._pending.append((task, response, future))
        if len(self._pending) >= self.settings.batch_size:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.linger_s, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        batch, self._pending, self._timer = self._pending, [], None
        if batch:
            flush = asyncio.ensure_future(self._score_pending(batch))
            self._flushes.add(flush)  # keep a reference until it is done
            flush.add_done_callback(self._flushed)

    def _flushed(self, flush: asyncio.Task[None]) -> None:
        self._flushes.discard(flush)
        if not flush.cancelled():
            flush.exception()  # retrieved: the callers already got it

    async def _score_pending(self, batch: list[tuple[Any, str, asyncio.Future[Scored]]]) -> None:
        try:
            scored = await self.score([t for t, _, _ in batch], [r for _, r, _ in batch])
        except Exception as e:  # every waiting caller gets it (and re-raises it)
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(e)
            raise
        for s, (_, _, future) in zip(scored, batch, strict=True):
            if not future.done():
                future.set_result(s)

    async def aclose(self) -> None:
        """Close the client of the running loop, if any."""
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.close()
        self._client = self._loop = None

    async def score(self, tasks: Sequence[Any], responses: Sequence[str]) -> list[Scored]:
        """Verify ``responses[i]`` against ``tasks[i]``.

        Raises:
            ValueError: the lengths differ or a task is not JSON.
            InvalidRequestError: a task is malformed or certd rejected the request as such.
            VerificationError: a receipt or verdict does not verify against the trusted keys.

        Returns:
            One Scored per response, in order.
        """
        if len(tasks) != len(responses):
            raise ValueError(
                f"expected one task per response, got {len(tasks)} and {len(responses)}"
            )
        parsed: dict[int, tasks_pb2.Task] = {}  # a group repeats one task object n times
        pbs = []
        for t in tasks:  # ``tasks`` keeps every object alive, so ids are not reused here
            pb = parsed.get(id(t))
            if pb is None:
                pb = parsed[id(t)] = parse_task(t)
            pbs.append(pb)
        digests = {id(pb): task_digest(pb) for pb in pbs}
        items = [
            VerifyItem(pb, r, str(i)) for i, (pb, r) in enumerate(zip(pbs, responses, strict=True))
        ]
        try:
            receipted = await self.client().verify_batch_receipted(items)
        except INFRA_ERRORS:
            return [
                Scored(None, None, "INFRA_ERROR", digests[id(pb)], response=r, task=pb)
                for pb, r in zip(pbs, responses, strict=True)
            ]
        out = []
        for pb, r, (v, receipt) in zip(pbs, responses, receipted, strict=True):
            status = tasks_pb2.VerdictStatus.Name(v.status)
            infra = v.status == tasks_pb2.INFRA_ERROR
            out.append(
                Scored(
                    None if infra else float(v.reward),
                    None if infra else (v.family.value if v.HasField("family") else ""),
                    status,
                    digests[id(pb)],
                    v,
                    receipt,
                    r,
                    pb,
                )
            )
        return out


def admit_groups(
    scored: Sequence[Scored], ratchet: Ratchet
) -> tuple[list[Scored], list[Admission]]:
    """Pass a batch's rollouts through the ratchet as stratified groups.

    The rollouts are grouped by (task, family) into ``forkgate.groups`` records; the rows of
    every refused group come back with ``reward=None`` and status ``"REFUSED"`` (left out).

    Args:
        scored: one batch, as ``Scorer.score`` returned it.
        ratchet: the ratchet to admit the groups through.

    Returns:
        (the rows, with refused ones left out; the refusals).
    """
    members: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(scored):
        if s.reward is not None and s.verdict is not None and s.receipt is not None:
            members.setdefault((s.question, s.family or ""), []).append(i)
    out = list(scored)
    refusals = []
    for rows in members.values():
        first = scored[rows[0]]
        assert first.task is not None
        rollouts = []
        for i in rows:
            s = scored[i]
            assert s.verdict is not None and s.receipt is not None  # selected so above
            rollouts.append((s.response, s.verdict, s.receipt))
        (record,) = group_records(first.task, rollouts)  # one family: one record
        admission = ratchet.admit(record)
        if not admission.admitted:
            refusals.append(admission)
            for i in rows:
                out[i] = replace(scored[i], reward=None, status="REFUSED")
    return out, refusals
