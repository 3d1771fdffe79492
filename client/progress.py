"""Progress for long CLI runs: a bar on a terminal, a log line every few seconds otherwise.

A job whose stderr goes to a file or a pipe (CI, ``nohup``, a cluster's log) still shows it
is alive: ``verify: 12000 lines, 3400/s`` at the first update, then every ``every_s``
seconds, and once at the end. Every ``forkgate`` verb that runs for long (``verify-batch``,
``build-forktrees``, ``run``, ``experiment``) reports through this one class.

Example::

    with Progress("verify", unit="lines") as progress:
        for obj in progress.track(work()):
            ...
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import IO, Any, TypeVar

__all__ = ["Progress"]

T = TypeVar("T")


class Progress:
    """Counts work; draws a tqdm bar on a TTY, else writes periodic lines to ``stream``.

    Args:
        desc: what is counted ("verify").
        unit: the unit's name ("lines").
        total: the expected count, when known.
        every_s: seconds between log lines when not on a TTY.
        stream: where to write (stderr).
        enabled: False shows nothing (a caller that reports progress its own way).
    """

    def __init__(
        self,
        desc: str,
        *,
        unit: str = "items",
        total: int | None = None,
        every_s: float = 10.0,
        stream: IO[str] | None = None,
        enabled: bool = True,
    ) -> None:
        self.desc, self.unit, self.total, self.every_s = desc, unit, total, every_s
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.count = 0
        self._started = self._last = time.monotonic()
        self._logged: int | None = None  # the count the last log line showed
        self._bar: Any = None
        self._postfix = ""
        if enabled and self.stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit, desc=desc, file=self.stream)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more; log a line at the first update and every ``every_s`` after."""
        self.count += n
        if self._bar is not None:
            self._bar.update(n)
            return
        if not self.enabled:
            return
        now = time.monotonic()
        if self._logged is None or now - self._last >= self.every_s:
            self._last = now
            self._log(now)

    def track(self, items: Iterable[T]) -> Iterator[T]:
        """Yield the items, counting each one once the caller is done with it."""
        for item in items:
            yield item
            self.update(1)

    def set_postfix(self, **fields: Any) -> None:
        """Extra figures: on the bar, or appended to the next log line."""
        self._postfix = ", ".join(f"{k}={v}" for k, v in fields.items())
        if self._bar is not None:
            self._bar.set_postfix(**fields)

    def _log(self, now: float) -> None:
        rate = self.count / max(now - self._started, 1e-9)
        of = f"/{self.total}" if self.total is not None else ""
        extra = f" ({self._postfix})" if self._postfix else ""
        per_s = f"{rate:.0f}" if rate >= 10 else f"{rate:.2f}"
        self.stream.write(f"{self.desc}: {self.count}{of} {self.unit}, {per_s}/s{extra}\n")
        self.stream.flush()
        self._logged = self.count

    def close(self) -> None:
        """Finish: close the bar, or log the final count when it moved since the last line."""
        if self._bar is not None:
            self._bar.close()
        elif self._logged is not None and self._logged != self.count:
            self._log(time.monotonic())

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
