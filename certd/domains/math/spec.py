"""The math domain's spec (see ``certd.domains.registry``); loads no SymPy."""

from __future__ import annotations

from typing import Any

from certd.domains.math.config import MathConfig
from certd.domains.math.task import MathTask
from certd.domains.registry import DomainSpec
from certd.errors import LimitExceededError
from certd.taskspec import math as wire

__all__ = ["SPEC"]


def convert(pb: Any, section: Any, field: str) -> MathTask:
    """The task value of a ``MathTask`` message (a gold of at most ``max_gold_chars``)."""
    if len(pb.gold) > section.max_gold_chars:
        raise LimitExceededError(
            f"math.gold: at most {section.max_gold_chars} chars, got {len(pb.gold)}",
            field=f"{field}.gold",
        )
    digits = pb.precision_digits or None  # 0 (unset): exact comparison
    return MathTask(gold=pb.gold, precision_digits=digits, question=pb.question)


def first_step(response: str) -> str | None:
    """math.first-step.v1's extraction (imported here: it loads SymPy)."""
    from certd.domains.math.first_step import first_step_text

    return first_step_text(response)


def _enabled(section: Any) -> bool:
    return bool(section.enabled)


SPEC = DomainSpec(
    task=wire.SPEC,
    convert=convert,
    checker="certd.authority.math_checker:MathChecker",
    config_section="math",
    config=MathConfig,
    enabled=_enabled,
    extra="math",
    first_step=first_step,
    warms_up=True,
)
