"""Progress when not on a terminal: periodic log lines on the stream, a final count."""

from __future__ import annotations

import io

from forkgate.progress import Progress


def test_progress_logs_lines_when_not_a_tty() -> None:
    out = io.StringIO()  # isatty() is False: no bar, log lines
    with Progress("verify-batch", unit="lines", every_s=0.0, stream=out) as p:
        p.update(1000)
        p.set_postfix(families=2)
        p.update(500)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("verify-batch: 1000 lines, ")
    assert lines[1].startswith("verify-batch: 1500 lines, ") and lines[1].endswith("(families=2)")
    assert lines[-1].startswith("verify-batch: 1500 lines")  # the final count


def test_progress_is_quiet_between_periods() -> None:
    out = io.StringIO()
    with Progress("x", every_s=3600.0, stream=out) as p:
        p.update(5)
    assert out.getvalue() == ""  # nothing logged before the first period: no final line either
