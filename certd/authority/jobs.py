"""A request's identity for scheduling: its fairness key and its cancellation.

Example::

    job = Job.new("req-7")
    context.add_callback(job.cancel.cancel)      # the RPC ended: stop its work
    with running(job):
        verdicts = checker.verify_batch(pairs)  # pools read current_job()

The service makes one ``Job`` per RPC. Checkers that schedule work on shared pools (the code
sandbox pool, the math worker pool) read it with ``current_job()`` and pass its key and scope to
the pool: workers are handed out round-robin across keys, and a cancelled job's queued checks
leave the queue while its running ones are killed. Outside an RPC (Certify's witness check, a
test) there is no job: every call is then a group of its own and is never cancelled.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sandboxes.fair import CancelScope

__all__ = ["Job", "current_job", "running"]


@dataclass(frozen=True, eq=False)
class Job:
    """One request's work.

    Attributes:
        key: The fairness group (the request id).
        cancel: Cancelled when the request ends early (client cancel, deadline).
        principal: Who asked (certd's admission principal: a token, a local uid, a host);
            '' when unknown. Pools keep a worker free for *other* principals, so one
            client's consecutive requests do not hold workers back from each other.
    """

    key: str
    cancel: CancelScope = field(default_factory=CancelScope)
    principal: str = ""

    @classmethod
    def new(cls, key: str | None = None, principal: str = "") -> Job:
        """A job keyed by ``key`` (a fresh random key when None)."""
        return cls(key or uuid.uuid4().hex[:16], principal=principal)

    @property
    def pool_key(self) -> tuple[str, str] | str:
        """The key a pool schedules by: ``(principal, request)``, or the request alone."""
        return (self.principal, self.key) if self.principal else self.key


_current: contextvars.ContextVar[Job | None] = contextvars.ContextVar("certd_job", default=None)


def current_job() -> Job | None:
    """The job this thread works for, or None outside a request."""
    return _current.get()


@contextmanager
def running(job: Job | None) -> Iterator[None]:
    """Make ``job`` the current job inside the block (None leaves it unset)."""
    token = _current.set(job)
    try:
        yield
    finally:
        _current.reset(token)
