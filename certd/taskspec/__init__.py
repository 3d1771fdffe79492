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

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "TaskSpec",
    "domain_choices",
    "domain_names",
    "register_task",
    "task_spec",
    "unregister_task",
]


@dataclass(frozen=True)
class TaskSpec:
    """How one domain's task looks on the wire and in its digest.

    Attributes:
        name: the domain name, which is the wire ``Task``'s oneof case.
        from_object: the domain's task object (the ``"task"`` part) → its message; raises
            ``ValueError`` naming the field (``task.numbers: …``).
        canonical: (message, identity version) → the JSON object the task digest covers.
            It must never change for a task once signed (tests/unit/test_task_canonical_golden.py).
        fields: every field the task object may have; ``certd.task_object`` refuses any other
            (one rule for every format that carries a task, docs/formats.md §0).
        rank: where the domain comes in listings and messages (lower first; then by
            registration).
        identity_gap: (message) → (field, why) when the task lacks a field its full identity
            needs, else None: such a task may be verified but not certified, given a fork tree
            or clustered (math without its question is its gold alone). None: always whole.
    """

    name: str
    from_object: Callable[[Mapping[str, Any]], Any]
    canonical: Callable[[Any, int], dict[str, Any]]
    fields: frozenset[str]
    rank: int = 100
    identity_gap: Callable[[Any], tuple[str, str] | None] | None = None


_SPECS: dict[str, TaskSpec] = {}


def register_task(spec: TaskSpec) -> None:
    """Add a domain's wire half (replacing a spec of the same name)."""
    _SPECS[spec.name] = spec


def unregister_task(name: str) -> None:
    """Remove a domain's wire half (a test's toy domain, after the test)."""
    _SPECS.pop(name, None)


def identity_gap(task: Any) -> tuple[str, str] | None:
    """What a wire ``Task`` lacks for its full identity: (field under the task, e.g.
    ``math.question``; why), or None when it is whole (``TaskSpec.identity_gap``)."""
    name = task.WhichOneof("domain")
    spec = _SPECS.get(name) if name else None
    if spec is None or spec.identity_gap is None:
        return None
    gap = spec.identity_gap(getattr(task, name))
    return None if gap is None else (f"{name}.{gap[0]}", gap[1])


def domain_names() -> tuple[str, ...]:
    """Every registered domain, by rank then registration (the built-ins first)."""
    return tuple(sorted(_SPECS, key=lambda n: _SPECS[n].rank))


def task_spec(name: str) -> TaskSpec | None:
    """The spec of a domain, or None."""
    return _SPECS.get(name)


def domain_choices(quote: str = "") -> str:
    """The domain names as prose: ``countdown, math or code`` (each in ``quote``)."""
    quoted = [f"{quote}{n}{quote}" for n in domain_names()]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _builtins() -> None:
    # Every module of this package that is not private is a built-in domain's wire half.
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            register_task(importlib.import_module(f"{__name__}.{module.name}").SPEC)


_builtins()
