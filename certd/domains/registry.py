"""The domain registry: each domain is one ``DomainSpec``, which every layer iterates.

A domain lives in ``certd/domains/<name>/`` and exports ``SPEC`` from its ``spec`` module: its
wire half (``certd.taskspec.TaskSpec``: task object ↔ message, canonical JSON for the digest),
the conversion of its message to the domain's task value (errors name the field), its config
section and its checker. ``certd.service.convert``, ``certd.authority.checker.Checkers`` and the
learned κ's step reader (``certd.kappa.steps``) iterate this registry; none lists domain names.
The built-ins are found by their package (any ``certd.domains.<pkg>.spec``); another domain
(a plugin, a test's toy domain) calls ``register``.

Example:
    >>> [s.name for s in specs()]
    ['countdown', 'math', 'code']
    >>> get("math").config_section, get("math").config.__name__
    ('math', 'MathConfig')
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from certd.taskspec import TaskSpec, domain_names, register_task, unregister_task

__all__ = ["DomainSpec", "get", "register", "specs", "unregister"]


def _always(section: Any) -> bool:
    return True


@dataclass(frozen=True)
class DomainSpec:
    """Everything certd needs to serve one domain.

    Attributes:
        task: the wire half (name = the wire ``Task``'s oneof case, task object, canonical JSON).
        convert: (domain message, config section, field) → the domain's frozen task value.
            Typed errors (``InvalidInputError``, ``LimitExceededError``) name their field in
            full under ``field`` (``items[3].task.math.gold``) or from the task's root.
        checker: the checker factory, called with the config section: a callable, or an entry
            point ``"module:attr"`` that the authority imports when it builds its checkers (a
            checker that runs sandboxes or worker pools lives above the pure domains).
        config_section: the ``CertdConfig`` key and attribute of the domain's section ("" when
            it has none: the checker factory gets None).
        config: the section's model (a frozen pydantic model whose defaults are the section's
            defaults); ``certd.config`` adds one section per registered domain that has one,
            so a domain's config keys come through this registry alone.
        enabled: whether the section asks to serve the domain.
        extra: the pip extra the checker needs (named when its import fails).
        first_step: the learned κ's reader of a response's first step (None: no learned κ).
        process_pool: (config section) → (worker processes, smallest batch sent to them) for a
            domain whose checks are pure, picklable code that the authority spreads over worker
            processes (``certd.authority.verifypool``); None: the checker isolates its own work.
        warms_up: the checker warms up after start (math: its pool and model); the server keeps
            the domain's health service (``<Verifier>/<name>``) NOT_SERVING until it is ready.
    """

    task: TaskSpec
    convert: Callable[[Any, Any, str], object]
    checker: str | Callable[[Any], Any]
    config_section: str = ""
    config: type[Any] | None = None
    enabled: Callable[[Any], bool] = _always
    extra: str = ""
    first_step: Callable[[str], str | None] | None = None
    process_pool: Callable[[Any], tuple[int, int]] | None = None
    warms_up: bool = False

    def __post_init__(self) -> None:
        if bool(self.config_section) != (self.config is not None):
            raise ValueError(
                f"domain {self.task.name!r}: config_section and config go together, "
                f"got {self.config_section!r} and {self.config!r}"
            )

    @property
    def name(self) -> str:
        """The domain name (the wire ``Task``'s oneof case)."""
        return self.task.name

    def section(self, cfg: Any) -> Any:
        """The domain's config section of ``cfg`` (None when it has none)."""
        return getattr(cfg, self.config_section) if self.config_section else None


_SPECS: dict[str, DomainSpec] = {}
_LOADED: list[bool] = []


def register(spec: DomainSpec) -> None:
    """Serve a domain (replacing a spec of the same name); registers its wire half too."""
    _load_builtins()
    register_task(spec.task)
    _SPECS[spec.name] = spec


def unregister(name: str) -> None:
    """Stop serving a registered domain (a test's toy domain, after the test)."""
    _SPECS.pop(name, None)
    unregister_task(name)


def specs() -> tuple[DomainSpec, ...]:
    """Every registered domain, in ``certd.taskspec`` order (the built-ins first)."""
    _load_builtins()
    return tuple(_SPECS[n] for n in domain_names() if n in _SPECS)


def get(name: str) -> DomainSpec | None:
    """The spec of a domain, or None."""
    _load_builtins()
    return _SPECS.get(name)


def _load_builtins() -> None:
    if _LOADED:
        return
    _LOADED.append(True)
    import certd.domains

    for module in pkgutil.iter_modules(certd.domains.__path__):
        if module.ispkg and importlib.util.find_spec(f"certd.domains.{module.name}.spec"):
            spec = importlib.import_module(f"certd.domains.{module.name}.spec").SPEC
            register_task(spec.task)
            _SPECS[spec.name] = spec
