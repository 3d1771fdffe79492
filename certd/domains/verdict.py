"""The typed outcome of checking one response.

Example:
    >>> v = Verdict(status=Status.CORRECT, reward=1.0, verifier="countdown@1.0.0")
    >>> v.status.name
    'CORRECT'
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["Family", "Status", "Verdict"]


class Status(enum.IntEnum):
    """Verdict statuses. Values match ``certd.v1.VerdictStatus`` in the proto."""

    STATUS_UNSPECIFIED = 0
    CORRECT = 1
    WRONG_ANSWER = 2
    INVALID_FORMAT = 3
    RULE_VIOLATION = 4
    TIME_LIMIT = 5
    MEMORY_LIMIT = 6
    RUNTIME_ERROR = 7
    COMPILE_ERROR = 8
    UNPARSED = 9
    INFRA_ERROR = 10  # the verifier failed; never a wrong answer


@dataclass(frozen=True, slots=True)
class Family:
    """An entry-family label: the κ that computed it and its label fields.

    Attributes:
        kappa: the κ name@version, e.g. ``countdown.first-op.v1``.
        label: canonical label string, e.g. ``25,-``.
        fields: the label's structured fields, e.g. ``{"operand": "25", "operator": "-"}``.
    """

    kappa: str
    label: str
    fields: dict[str, str] = field(default_factory=dict)

    def __reduce__(self) -> tuple[type[Family], tuple[str, str, dict[str, str]]]:
        # Pickled as a constructor call, like ``Verdict``.
        return (Family, (self.kappa, self.label, self.fields))


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of checking a response.

    Attributes:
        status: the typed outcome.
        reward: the shaped reward.
        verifier: name@version of the verifier.
        family: the κ label of the answer (None when there is no parseable answer).
        initiated: the entry the reasoning text initiated first, whenever the text writes
            one (Countdown: the first ``number op operand`` before the answer); it may equal
            ``family`` or differ from it.
        detail: a short human-readable explanation.
        answer: the extracted answer text ("" when none).
        canonical: canonical form of the solution (for the pseudo-fork gate), "" if none.
        labels: the labels under the domain's other κs (math: ``math.route.v1`` beside the
            default ``math.first-step.v1``); ``family`` holds the default κ's label.
    """

    status: Status
    reward: float
    verifier: str
    family: Family | None = None
    initiated: Family | None = None
    detail: str = ""
    answer: str = ""
    canonical: str = ""
    labels: tuple[Family, ...] = ()

    def __reduce__(self) -> tuple[type[Verdict], tuple[object, ...]]:
        # Pickled as a constructor call: worker processes return verdicts, and the default
        # state of a frozen slotted dataclass takes several times longer to pickle and load.
        return (
            Verdict,
            (
                self.status,
                self.reward,
                self.verifier,
                self.family,
                self.initiated,
                self.detail,
                self.answer,
                self.canonical,
                self.labels,
            ),
        )

    def label_for(self, kappa: str) -> Family | None:
        """The label under ``kappa`` (the default κ's or one of ``labels``), if computed."""
        if self.family is not None and self.family.kappa == kappa:
            return self.family
        return next((f for f in self.labels if f.kappa == kappa), None)
