"""What a checker's worker pools and models report to health checks and metrics.

Example::

    ComponentHealth("math_pool", started=True, configured=2, alive=1,
                    problem="math pool: 1 of 2 workers alive")

A component that starts on first use reports ``started=False`` (and no problem) until then.
``problem`` is set while the component cannot do all its work; ``fatal`` when it can do none
of it (the server's overall health turns NOT_SERVING).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ComponentHealth"]


@dataclass(frozen=True, slots=True)
class ComponentHealth:
    """The state of one pool or model.

    Attributes:
        name: ``math_pool``, ``code_pool``, ``embedder`` (a metric label and a health service
            name suffix).
        started: whether it has been started (pools and models start on first use).
        configured: workers configured (1 for a model).
        alive: workers alive now (1 for a loaded model).
        problem: why it is degraded, or None.
        fatal: it can do none of its work.
    """

    name: str
    started: bool
    configured: int
    alive: int
    problem: str | None = None
    fatal: bool = False
