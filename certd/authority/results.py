"""What the authority takes and returns: typed values the service encodes, nothing on the wire.

Example:
    >>> Refusal("LABEL_MISMATCH", "label: claimed '25,-', witness carries '5,*'").reason
    'LABEL_MISMATCH'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from certd.authority.checker import DomainTask
from certd.domains.verdict import Verdict
from certd.errors import InvalidInputError
from certd.ledger.certindex import IndexedCertificate
from certd.taskspec import identity_gap
from certd.tlog import SignedCheckpoint
from certd.v1 import tasks_pb2

if TYPE_CHECKING:
    from certd.ledger.log import Ledger

__all__ = [
    "CertifyOutcome",
    "CertifyRequest",
    "CheckedTask",
    "Families",
    "FeasibleLabel",
    "ForkTreePage",
    "IndexedCertificate",
    "Logged",
    "Proven",
    "Refusal",
    "proven",
]


class Logged(Protocol):
    """A value the ledger holds at ``index`` (a certificate, an acceptance decision)."""

    @property
    def index(self) -> int: ...


T = TypeVar("T")
L = TypeVar("L", bound=Logged)


@dataclass(frozen=True, slots=True)
class Proven(Generic[T]):
    """A durable ledger entry's value with its inclusion proof, for the reply to carry.

    ``proof`` is the audit path of the value's entry (its ``index`` and ``envelope``) to the
    root of ``checkpoint``; the authority asks the ledger for it once, so the service encodes
    without reading the ledger.
    """

    value: T
    checkpoint: SignedCheckpoint
    proof: list[bytes]


def proven(ledger: Ledger, values: Sequence[L]) -> list[Proven[L]]:
    """Durable values with their inclusion proofs, all in the latest checkpoint (one call).

    Raises:
        NotFoundError: a value's entry is not covered by the latest checkpoint.
        StoreError: the store failed.
    """
    if not values:
        return []
    checkpoint, proofs = ledger.prove_many([v.index for v in values])
    return [Proven(v, checkpoint, p) for v, p in zip(values, proofs, strict=True)]


@dataclass(frozen=True, slots=True)
class CheckedTask:
    """A task converted from the wire once: its message, digest, domain and domain value."""

    pb: tasks_pb2.Task
    digest: str
    domain: str
    value: DomainTask

    def require_identity(self, what: str) -> None:
        """Refuse a task that lacks a field of its identity for ``what`` (certify, a fork tree,
        the learned κ; ``TaskSpec.identity_gap``): a math task without a question would be its
        gold alone, so two questions with one gold would share certificates, fork trees and
        clusters. Verifying does not need one.

        Raises:
            InvalidInputError: the task lacks such a field (e.g. ``task.math.question``).
        """
        gap = identity_gap(self.pb)
        if gap is not None:
            field, why = gap
            raise InvalidInputError(
                f"task.{field}: required for {what}: {why}; only verify takes a "
                f"{self.domain} task without one (docs/formats.md, Task identity)",
                field=f"task.{field}",
            )


@dataclass(frozen=True, slots=True)
class CertifyRequest:
    """One Certify: the claim that ``label`` (under ``kappa``) is feasible, with its witness.

    ``fields`` are the claimed label's fields (nothing reads them: a client shapes no label).
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
    """A durable certificate with its inclusion proof, or a refusal."""

    certificate: Proven[IndexedCertificate] | None = None
    existing: bool = False
    refusal: Refusal | None = None


@dataclass(frozen=True, slots=True)
class ForkTreePage:
    """The certificates of one (task, κ) in label order, with their inclusion proofs (in one
    checkpoint); ``next_after`` when there are more."""

    task_digest: str
    kappa: str
    certificates: list[Proven[IndexedCertificate]]
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
