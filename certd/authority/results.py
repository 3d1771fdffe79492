"""What the authority takes and returns: typed values the service encodes, nothing on the wire.

Example:
    >>> Refusal("LABEL_MISMATCH", "label: claimed '25,-', witness carries '5,*'").reason
    'LABEL_MISMATCH'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from certd.authority.checker import DomainTask
from certd.domains.verdict import Verdict
from certd.ledger.certindex import IndexedCertificate
from certd.v1 import tasks_pb2

__all__ = [
    "CertifyOutcome",
    "CertifyRequest",
    "CheckedTask",
    "Families",
    "FeasibleLabel",
    "ForkTreePage",
    "Refusal",
]


@dataclass(frozen=True, slots=True)
class CheckedTask:
    """A task converted from the wire once: its message, digest, domain and domain value."""

    pb: tasks_pb2.Task
    digest: str
    domain: str
    value: DomainTask


@dataclass(frozen=True, slots=True)
class CertifyRequest:
    """One Certify: the claim that ``label`` (under ``kappa``) is feasible, with its witness.

    ``fields`` are the claimed label's fields; only the learned κ reads them.
    """

    task: CheckedTask
    kappa: str
    label: str
    witness: str
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a Certify was refused."""

    reason: str
    detail: str
    verdict: Verdict | None = None


@dataclass(frozen=True, slots=True)
class CertifyOutcome:
    """A durable certificate, or a refusal."""

    certificate: IndexedCertificate | None = None
    existing: bool = False
    refusal: Refusal | None = None


@dataclass(frozen=True, slots=True)
class ForkTreePage:
    """The certificates of one (task, κ) in label order; ``next_after`` when there are more."""

    task_digest: str
    kappa: str
    certificates: list[IndexedCertificate]
    next_after: str | None = None


@dataclass(frozen=True, slots=True)
class FeasibleLabel:
    """A feasible label under the domain's default κ and a witness that carries it."""

    label: str
    fields: dict[str, str]
    witness: str


@dataclass(frozen=True, slots=True)
class Families:
    """Every feasible label of a task, grouped into families (``EnumerateFamilies``)."""

    kappa: str
    labels: list[FeasibleLabel]
    families: list[tuple[int, ...]]
    complete: bool
    certifiable: int
