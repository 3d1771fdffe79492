"""Progress for long CLI runs: a bar on a terminal, a log line every few seconds otherwise.

A job whose stderr goes to a file or a pipe (CI, ``nohup``, a cluster's log) still shows it
is alive: ``verify: 12000 lines, 3400/s`` every ``every_s`` seconds and once at the end.

Example::

    with Progress("verify", unit="lines") as progress:
        for obj in work():
            progress.update(1)
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import IO, Any

__all__ = ["Progress"]


class Progress:
    """Counts work; draws a tqdm bar on a TTY, else writes periodic lines to ``stream``.

    Args:
        desc: what is counted ("verify").
        unit: the unit's name ("lines").
        total: the expected count, when known.
        every_s: seconds between log lines when not on a TTY.
        stream: where to write (stderr).
    """

    def __init__(
        self,
        desc: str,
        *,
        unit: str = "items",
        total: int | None = None,
        every_s: float = 10.0,
        stream: IO[str] | None = None,
    ) -> None:
        self.desc, self.unit, self.total, self.every_s = desc, unit, total, every_s
        self.stream = stream if stream is not None else sys.stderr
        self.count = 0
        self._started = self._last = time.monotonic()
        self._bar: Any = None
        self._postfix = ""
        if self.stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit, desc=desc, file=self.stream)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more; log a line when ``every_s`` has passed since the last one."""
        self.count += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            self._log(now)

    def set_postfix(self, **fields: Any) -> None:
        """Extra figures: on the bar, or appended to the next log line."""
        self._postfix = ", ".join(f"{k}={v}" for k, v in fields.items())
        if self._bar is not None:
            self._bar.set_postfix(**fields)

    def _log(self, now: float) -> None:
        rate = self.count / max(now - self._started, 1e-9)
        of = f"/{self.total}" if self.total is not None else ""
        extra = f" ({self._postfix})" if self._postfix else ""
        self.stream.write(f"{self.desc}: {self.count}{of} {self.unit}, {rate:.0f}/s{extra}\n")
        self.stream.flush()

    def close(self) -> None:
        """Finish: close the bar, or log the final count when a line was logged before."""
        if self._bar is not None:
            self._bar.close()
        elif self._last != self._started:
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
