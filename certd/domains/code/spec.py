"""The code domain's spec (see ``certd.domains.registry``)."""

from __future__ import annotations

from typing import Any

from certd.domains.code.config import CodeConfig
from certd.domains.code.task import LANGUAGES, CodeLimits, CodeTask, IoCase
from certd.domains.registry import DomainSpec
from certd.errors import InvalidInputError
from certd.taskspec import code as wire

__all__ = ["SPEC"]

_FIELDS = ("cases", "compare", "test", "entry_point", "prompt")


def convert(pb: Any, section: Any, field: str) -> CodeTask:
    """The task value of a ``CodeTask`` message: function tests or stdin/stdout cases."""
    limits = CodeLimits(
        max_program_bytes=section.max_program_bytes,
        max_cases=section.max_cases,
        max_case_bytes=section.max_case_bytes,
        max_response_bytes=section.max_response_bytes,
    )
    language = pb.language or "python"
    if language not in LANGUAGES:
        raise InvalidInputError(
            f"language: expected one of {', '.join(LANGUAGES)}, got {language!r}",
            field=f"{field}.language",
        )
    function_layout = bool(pb.test or pb.entry_point or pb.prompt)
    try:
        if pb.cases:
            if function_layout:
                raise InvalidInputError(
                    "expected either cases or prompt/test/entry_point, got both", field=field
                )
            cases = [IoCase(stdin=t.stdin, stdout=t.stdout) for t in pb.cases]
            return CodeTask.io_cases(language, cases, compare=pb.compare or "exact", limits=limits)
        if language != "python":
            raise InvalidInputError(
                f"language: function tests are Python only, got {language!r} without cases",
                field=f"{field}.language",
            )
        return CodeTask.function_tests(
            prompt=pb.prompt, test=pb.test, entry_point=pb.entry_point, limits=limits
        )
    except InvalidInputError as e:
        if e.field:
            raise
        what = str(e).split(":", 1)[0]
        sub = what if what in _FIELDS else ""
        raise type(e)(str(e), field=f"{field}.{sub}" if sub else field) from e


SPEC = DomainSpec(
    task=wire.SPEC,
    convert=convert,
    checker="certd.authority.code_checker:CodeChecker",
    config_section="code",
    config=CodeConfig,
)
