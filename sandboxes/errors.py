"""Errors raised by the sandboxes package.

Example:
    >>> from sandboxes.errors import SandboxError, SandboxUnavailableError
    >>> issubclass(SandboxUnavailableError, SandboxError)
    True

The tree::

    SandboxError                  root: every error this package raises
    ├── SandboxConfigError        a Limits/Program/backend setting is invalid
    ├── SandboxUnavailableError   the backend cannot run here (no bwrap, no Docker engine, no image)
    ├── SandboxBusyError          a warm pool's queue is full (backpressure) or it is closed
    ├── CheckCancelledError       the request a check belonged to was cancelled; its work stopped
    └── SandboxProtocolError      a worker broke the supervisor protocol (it is recycled)

A program that fails, hangs or floods is never an error: it is an ``ExecResult`` with a status.
"""

from __future__ import annotations

__all__ = [
    "CheckCancelledError",
    "SandboxBusyError",
    "SandboxConfigError",
    "SandboxError",
    "SandboxProtocolError",
    "SandboxUnavailableError",
]


class SandboxError(Exception):
    """Root of every error raised by :mod:`sandboxes`."""


class SandboxConfigError(SandboxError):
    """A limit, program or backend setting is invalid (expected X, got Y)."""


class SandboxUnavailableError(SandboxError):
    """The backend cannot run on this machine (missing binary, engine or image)."""


class SandboxBusyError(SandboxError):
    """A warm pool refused work: its queue is full or the pool is closed."""


class CheckCancelledError(SandboxError):
    """The check's request was cancelled: it was dequeued, or its sandbox killed and recycled."""


class SandboxProtocolError(SandboxError):
    """A sandboxed worker sent something other than a well-formed reply."""
