"""Typed verdicts: an enum status and plain fields over certd's protobuf ``Verdict``.

Example::

    from forkgate import CertdClient, Status
    with CertdClient("127.0.0.1:50051") as c:
        v = c.verify(task, "<answer>(25-5)*4+3</answer>")
    v.status is Status.CORRECT, v.reward, v.family      # (True, 1.0, "25,-")
    v.pb                                                 # the protobuf, for receipts and JSON

``Status`` is an ``IntEnum`` with the values of ``certd.v1.VerdictStatus``, so it also compares
with the protobuf field: ``pb_verdict.status == Status.CORRECT``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from certd.v1 import verifier_pb2

__all__ = ["Status", "TypedVerdict"]


class Status(enum.IntEnum):
    """A verdict's status; the values of ``certd.v1.VerdictStatus``."""

    VERDICT_STATUS_UNSPECIFIED = 0
    CORRECT = 1
    WRONG_ANSWER = 2
    INVALID_FORMAT = 3
    RULE_VIOLATION = 4
    TIME_LIMIT = 5
    MEMORY_LIMIT = 6
    RUNTIME_ERROR = 7
    COMPILE_ERROR = 8
    UNPARSED = 9
    INFRA_ERROR = 10  # certd or its host failed; never a wrong answer


_STATUS: dict[int, Status] = {s.value: s for s in Status}


@dataclass(frozen=True, slots=True)
class TypedVerdict:
    """One verdict with plain Python fields.

    Attributes:
        id: the request item's id.
        status: the status.
        reward: the reward.
        family: the κ label value of the entry family, or None when the verifier gave none.
        kappa: the κ name@version of ``family``, or None.
        detail: a short explanation.
        verifier: the verifier's name@version.
        answer: the answer the verifier read, if any.
        elapsed_ms: the check time.
        pb: the protobuf verdict (its digest and receipt path check against the receipt).
    """

    id: str
    status: Status
    reward: float
    family: str | None
    kappa: str | None
    detail: str
    verifier: str
    answer: str
    elapsed_ms: float
    pb: verifier_pb2.Verdict

    @classmethod
    def of(cls, v: verifier_pb2.Verdict) -> TypedVerdict:
        """The typed view of a protobuf verdict.

        Raises:
            ValueError: a status this client does not know.
        """
        has = v.HasField("family")
        family = v.family
        status = v.status
        return cls(
            id=v.id,
            # A dict lookup: calling the enum costs more than the rest of the conversion.
            status=_STATUS[status] if status in _STATUS else Status(status),
            reward=float(v.reward),
            family=family.value if has else None,
            kappa=family.kappa if has else None,
            detail=v.detail,
            verifier=v.verifier,
            answer=v.answer,
            elapsed_ms=float(v.elapsed_ms),
            pb=v,
        )

    @property
    def correct(self) -> bool:
        """Whether the status is CORRECT."""
        return self.status is Status.CORRECT
