"""Progress when not on a terminal: a first log line, periodic ones, a final count."""

from __future__ import annotations

import io
import subprocess
import sys

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
    assert len(lines) == 2  # the last line already showed the final count


def test_progress_logs_the_first_update_then_waits_a_period() -> None:
    out = io.StringIO()
    with Progress("x", total=9, unit="tasks", every_s=3600.0, stream=out) as p:
        for _ in p.track(range(9)):
            pass
    lines = out.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == ["x: 1/9 tasks", "x: 9/9 tasks"]


def test_disabled_progress_writes_nothing() -> None:
    out = io.StringIO()
    with Progress("x", every_s=0.0, stream=out, enabled=False) as p:
        p.update(3)
    assert out.getvalue() == ""


def test_a_job_whose_stderr_is_a_pipe_gets_plain_lines() -> None:
    """What `forkgate run` and `forkgate experiment` do off a terminal: lines, no bar."""
    code = (
        "from forkgate.progress import Progress\n"
        "with Progress('evaluate', unit='tasks', total=3, every_s=0.0) as p:\n"
        "    for _ in p.track(range(3)):\n"
        "        pass\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    lines = run.stderr.splitlines()
    assert [line.split(",")[0] for line in lines] == [f"evaluate: {n}/3 tasks" for n in (1, 2, 3)]
    assert "\r" not in run.stderr and "it/s" not in run.stderr  # no tqdm bar
