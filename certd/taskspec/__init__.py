"""The wire half of every domain: its task message, task object and canonical JSON (pure).

A domain's ``TaskSpec`` says how its ``{"domain": …, "task": {…}}`` object becomes the domain's
message in the wire ``Task`` oneof (``name`` is the oneof case) and which JSON object the task
digest covers. ``certd.task_object``, ``certd.payloads`` and the forkgate CLI iterate this
registry; the serving half of a domain (conversion, config, checker) is its
``certd.domains.<name>.spec``, which registers its ``TaskSpec`` here too. Light: only the
stubs, so the forkgate client may import it.

Example:
    >>> domain_names()
    ('countdown', 'math', 'code')
    >>> spec = task_spec("countdown")
    >>> spec.canonical(spec.from_object({"numbers": [1], "target": 1}), 2)
    {'domain': 'countdown', 'numbers': [1], 'rules': {'exactly_once': True}, 'target': 1}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TaskSpec", "domain_choices", "domain_names", "register_task", "task_spec"]


@dataclass(frozen=True)
class TaskSpec:
    """How one domain's task looks on the wire and in its digest.

    Attributes:
        name: the domain name, which is the wire ``Task``'s oneof case.
        from_object: the domain's task object (the ``"task"`` part) → its message; raises
            ``ValueError`` naming the field (``task.numbers: …``).
        canonical: (message, identity version) → the JSON object the task digest covers.
            It must never change for a task once signed (tests/unit/test_domain_registry.py).
    """

    name: str
    from_object: Callable[[Mapping[str, Any]], Any]
    canonical: Callable[[Any, int], dict[str, Any]]


_SPECS: dict[str, TaskSpec] = {}


def register_task(spec: TaskSpec) -> None:
    """Add a domain's wire half (replacing a spec of the same name)."""
    _SPECS[spec.name] = spec


def domain_names() -> tuple[str, ...]:
    """Every registered domain, in registration order (the built-ins first)."""
    return tuple(_SPECS)


def task_spec(name: str) -> TaskSpec | None:
    """The spec of a domain, or None."""
    return _SPECS.get(name)


def domain_choices(quote: str = "") -> str:
    """The domain names as prose: ``countdown, math or code`` (each in ``quote``)."""
    quoted = [f"{quote}{n}{quote}" for n in _SPECS]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _builtins() -> None:
    # The built-in domains, in the order every message lists them.
    from certd.taskspec import code, countdown, math

    for module in (countdown, math, code):
        register_task(module.SPEC)


_builtins()
