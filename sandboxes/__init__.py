"""Isolation backends for untrusted programs (bubblewrap, Docker, gVisor) and warm pools.

Example:
    >>> from sandboxes import ExecStatus, Limits, Program
    >>> Limits(cpu_time_s=1.0).cpu_time_s
    1.0
    >>> ExecStatus.TIME_LIMIT.value
    'TIME_LIMIT'

Running something needs a backend (``BwrapSandbox`` needs bubblewrap)::

    from sandboxes import BwrapSandbox, Program
    with BwrapSandbox() as box:
        result = box.run(Program(argv=("python3", "-c", "print('hi')")))
"""

from .base import Sandbox
from .bwrap import BwrapOptions, BwrapSandbox
from .errors import (
    CheckCancelledError,
    SandboxBusyError,
    SandboxConfigError,
    SandboxError,
    SandboxProtocolError,
    SandboxUnavailableError,
)
from .fair import CancelScope, FairQueue
from .limits import Limits
from .pool import PoolStats, WarmPool
from .program import Program
from .result import ExecResult, ExecStatus
from .worker import Worker

__all__ = [
    "BwrapOptions",
    "BwrapSandbox",
    "CancelScope",
    "CheckCancelledError",
    "ExecResult",
    "ExecStatus",
    "FairQueue",
    "Limits",
    "PoolStats",
    "Program",
    "Sandbox",
    "SandboxBusyError",
    "SandboxConfigError",
    "SandboxError",
    "SandboxProtocolError",
    "SandboxUnavailableError",
    "WarmPool",
    "Worker",
]
