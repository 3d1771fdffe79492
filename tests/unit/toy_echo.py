"""The "echo" toy domain: CORRECT when the response repeats the task's text.

Everything certd needs is this one file (the spec, its converter, its checker and its config
section) and one ``certd.domains.registry.register(SPEC)`` call. To go over gRPC a domain also
needs its case in the wire ``Task`` oneof (proto/certd/v1/tasks.proto and the stubs): that is
the one place the registry cannot reach. Its message here is ``google.protobuf.StringValue``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.wrappers_pb2 import StringValue
from pydantic import BaseModel, ConfigDict, Field

from certd.authority.checker import CheckerBase
from certd.domains.registry import DomainSpec
from certd.domains.verdict import Family, Status, Verdict
from certd.errors import InvalidInputError, LimitExceededError
from certd.taskspec import TaskSpec


def _from_object(obj: Mapping[str, Any]) -> StringValue:
    text = obj.get("text")
    if not isinstance(text, str):
        raise ValueError(f"task.text: expected a string, got {text!r}")
    return StringValue(value=text)


def _canonical(msg: StringValue, identity: int) -> dict[str, Any]:
    return {"domain": "echo", "text": msg.value}


class EchoConfig(BaseModel):
    """The echo domain's config section (``CertdConfig``'s ``echo`` key, through the spec)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_text_chars: int = Field(64, ge=1)
    verifier: str = "echo@1"


def _convert(pb: StringValue, section: EchoConfig, field: str) -> str:
    if not pb.value:
        raise InvalidInputError("text: expected a non-empty string", field=f"{field}.text")
    if len(pb.value) > section.max_text_chars:
        raise LimitExceededError(
            f"text: {len(pb.value)} characters, more than {section.max_text_chars}",
            field=f"{field}.text",
        )
    return pb.value


@dataclass(frozen=True)
class EchoChecker(CheckerBase):
    """CORRECT when the response is the text; the family is its first character."""

    domain: str = "echo"
    kappa: str = "echo.first.v1"
    kappas: tuple[str, ...] = ("echo.first.v1",)
    verifier: str = "echo@1"

    def verify(self, task: str, response: str, *, canonical: bool = False) -> Verdict:
        ok = response == task
        return Verdict(
            Status.CORRECT if ok else Status.WRONG_ANSWER,
            1.0 if ok else 0.0,
            self.verifier,
            family=Family(self.kappa, response[:1]),
        )


SPEC = DomainSpec(
    task=TaskSpec(
        name="echo", from_object=_from_object, canonical=_canonical, fields=frozenset({"text"})
    ),
    convert=_convert,
    checker=lambda section: EchoChecker(verifier=section.verifier),
    config_section="echo",
    config=EchoConfig,
    first_step=lambda response: response.split(",", 1)[0] or None,
)
