"""The ``Sandbox`` interface every backend implements.

Example (needs bubblewrap)::

    from sandboxes import BwrapSandbox, Limits, Program
    with BwrapSandbox(Limits(cpu_time_s=1, wall_time_s=2)) as box:
        r = box.run(Program(argv=("python3", "-c", "print(6 * 7)")))
        assert r.ok and r.stdout == b"42\\n"

A backend has one abstract hook, ``start_worker``: start a sandbox (namespace set or container)
running the trusted zygote and return a ``Worker``. The base class checks limits and runs a
one-shot program in a worker it kills afterwards; ``sandboxes.pool.WarmPool`` keeps workers.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from types import TracebackType

from .errors import SandboxConfigError, SandboxError
from .limits import Limits
from .program import Program
from .result import ExecResult
from .worker import Worker, zygote_source

__all__ = ["Sandbox"]


class Sandbox(ABC):
    """An isolation backend.

    Attributes:
        name: The backend's name ("bwrap", "docker", "gvisor").
        limits: The ceiling: the default limits of a run and the most any run may ask for.
        fresh_per_run: A worker runs one check only (pools replace it after each run).
    """

    name: str = "sandbox"
    fresh_per_run: bool = False

    def __init__(self, limits: Limits | None = None) -> None:
        """Set the ceiling.

        Args:
            limits: Default and largest limits; ``Limits()`` when omitted.
        """
        self.limits = limits or Limits()
        self.preloads: dict[str, str] = {}
        self._source = zygote_source()

    def preload(self, name: str, source: str) -> None:
        """Have every template started from now on import ``source`` as module ``name``.

        For trusted code that every inline Python run of a caller loads (certd's function-test
        harness): the template imports it once, before it freezes its objects and before any
        run exists, so a run finds it in ``sys.modules`` instead of loading it (a run's copy is
        copy-on-write; nothing a run does reaches the template or the next run). Never for
        anything a run supplies. Workers started earlier keep their templates as they are.

        Args:
            name: The module's name (an identifier).
            source: Its Python source (the template's interpreter compiles it).

        Raises:
            SandboxConfigError: ``name`` is not an identifier.
        """
        if not name.isidentifier():
            raise SandboxConfigError(f"preload: expected a module name, got {name!r}")
        self.preloads[name] = source
        self._source = zygote_source(self.preloads)

    @abstractmethod
    def start_worker(self) -> Worker:
        """Start one sandbox running the zygote, with the ceiling's limits at sandbox level.

        Returns:
            A ready worker.

        Raises:
            SandboxUnavailableError: The backend cannot run here.
            SandboxProtocolError: The worker did not start.
        """

    def check_limits(self, limits: Limits | None) -> Limits:
        """Resolve and validate a run's limits against the ceiling.

        Args:
            limits: The run's limits, or None for the ceiling.

        Returns:
            The limits to use.

        Raises:
            SandboxConfigError: A limit exceeds the ceiling.
        """
        if limits is None:
            return self.limits
        if not limits.fits_within(self.limits):
            raise SandboxConfigError(
                f"limits: expected at most the ceiling {self.limits}, got {limits}"
            )
        return limits

    def run(self, program: Program, limits: Limits | None = None) -> ExecResult:
        """Run one program in a sandbox started for it alone.

        Args:
            program: What to run.
            limits: The run's limits (at most the ceiling); the ceiling when omitted.

        Returns:
            The typed result; an infrastructure failure is ``SANDBOX_ERROR``.

        Raises:
            SandboxConfigError: The limits exceed the ceiling.
        """
        lim = self.check_limits(limits)
        start = time.monotonic()
        try:
            worker = self.start_worker()
        except SandboxError as exc:
            return ExecResult.sandbox_error(str(exc), wall_time_s=time.monotonic() - start)
        try:
            return worker.run(program, lim)
        finally:
            worker.kill()

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release backend resources (a no-op unless a backend holds some)."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
