"""Every file a forkgate verb writes is written whole or not at all (temp file + rename)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from forkgate.cli_io import open_out, open_out_bytes
from forkgate.errors import InvalidRequestError


def test_open_out_replaces_on_success_and_keeps_the_old_file_on_error(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    out.write_text("the earlier results\n")
    with pytest.raises(RuntimeError), open_out(str(out)) as sink:
        sink.write("half of the new")
        raise RuntimeError("failed half-way")
    assert out.read_text() == "the earlier results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.jsonl"]  # no temp left
    with open_out_bytes(str(out)) as raw:
        raw.write(b"new\n")
    assert out.read_bytes() == b"new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.jsonl"]
    with (
        pytest.raises(InvalidRequestError, match="cannot write there"),
        open_out(str(tmp_path / "absent" / "x.jsonl")),
    ):
        pass


def test_a_failed_verify_batch_leaves_an_existing_out_as_it_was(
    dead_address: str, tmp_path: Path
) -> None:
    lines = tmp_path / "in.jsonl"
    task = {"domain": "countdown", "task": {"numbers": [3, 4], "target": 7}}
    lines.write_text(json.dumps({"task": task, "response": "<answer>3+4</answer>"}) + "\n")
    out = tmp_path / "verdicts.jsonl"
    out.write_text("yesterday's verdicts\n")
    run = subprocess.run(
        [
            sys.executable, "-m", "forkgate.cli", "verify-batch",
            "--server", dead_address, "--timeout", "2",
            "--in", str(lines), "--out", str(out),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 3, run.stderr  # certd unreachable
    assert out.read_text() == "yesterday's verdicts\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "verdicts.jsonl"]
