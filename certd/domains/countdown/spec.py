"""The Countdown domain's spec (see ``certd.domains.registry``).

Example:
    >>> SPEC.task.name, SPEC.config_section
    ('countdown', 'countdown')
"""

from __future__ import annotations

from typing import Any

from certd.domains.countdown.config import CountdownConfig
from certd.domains.countdown.first_step import countdown_first_step
from certd.domains.countdown.limits import CountdownRules
from certd.domains.countdown.task import CountdownTask
from certd.domains.registry import DomainSpec
from certd.errors import LimitExceededError
from certd.taskspec import countdown as wire

__all__ = ["SPEC"]


def convert(pb: Any, section: Any, field: str) -> CountdownTask:
    """The task value of a ``CountdownTask`` message (at most ``max_numbers`` numbers)."""
    numbers = tuple(pb.numbers)
    if len(numbers) > section.max_numbers:
        raise LimitExceededError(
            f"countdown.numbers: at most {section.max_numbers} numbers, got {len(numbers)}",
            field=f"{field}.numbers",
        )
    return CountdownTask(
        numbers=numbers,
        target=pb.target,
        rules=CountdownRules(exactly_once=not pb.rules.at_most_once),
    )


def process_pool(section: Any) -> tuple[int, int]:
    """Countdown's verify workers and the smallest batch they take (``[countdown]``)."""
    return section.verify_workers, section.verify_pool_min_batch


SPEC = DomainSpec(
    task=wire.SPEC,
    convert=convert,
    checker="certd.authority.countdown_checker:countdown_checker",
    config_section="countdown",
    config=CountdownConfig,
    first_step=countdown_first_step,
    process_pool=process_pool,
)
