"""Every command block of README.md runs as written (issue 19): no non-zero exit, no traceback.

The blocks run in order in one fresh directory, as a new user would run them: ``.venv/bin/``
is this checkout's virtualenv, ``127.0.0.1:50051`` is replaced by the address of the real
``certd serve`` that the line marked ``# docs-test: background`` starts (on a loopback port
the OS picks, read from its serving line; its data dir ``./certd-data``), and
``$HOME``/``$XDG_STATE_HOME`` point into the directory. A block that holds
``# docs-test: skip — why`` is not run; the test requires the reason and keeps the list of
such blocks short (see ``ALLOWED_SKIPS``).
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# `make run`/`make test` (minutes, and the suite itself); the Redis cluster; the single-node
# image in the foreground (test_single_image.py runs it)
ALLOWED_SKIPS = 3
BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(README.read_text(encoding="utf-8"))]


def _commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comment-only lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [
        line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def _start_serving(
    line: str, cwd: Path, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    """Start the README's background ``certd serve`` on port 0; its address from its serving line.

    The OS picks the port when certd binds it (no port picked here and bound later, which
    another process could take in between); the line ``certd serving on HOST:PORT …`` tells it.
    """
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {line} --listen 127.0.0.1:0"], cwd=cwd, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    fd, out = proc.stdout.fileno(), b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 1.0)[0]:
            chunk = os.read(fd, 4096)
            assert chunk, f"certd serve exited ({proc.wait()}): {out[-500:]!r}"
            out += chunk
        if m := re.search(rb"^certd serving on (\S+) ", out, re.M):
            assert (cwd / "certd-data" / "signing.pub").exists()
            return proc, m.group(1).decode()
    proc.kill()
    raise AssertionError("certd serve did not start within 120 s")


def test_the_readme_blocks_have_few_justified_skips() -> None:
    skips = [b for _, b in _blocks() if "# docs-test: skip" in b]
    assert len(skips) <= ALLOWED_SKIPS
    for b in skips:
        assert re.search(r"# docs-test: skip — \S", b), f"a skip says why: {b[:80]}"


@pytest.mark.slow
def test_every_readme_command_runs(tmp_path: Path) -> None:
    address = ""  # the background server's, once it serves
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORKGATE_")}
    env.update(HOME=str(tmp_path / "home"), XDG_STATE_HOME=str(tmp_path / "state"))
    venv = str(Path(sys.executable).parent.parent)

    def real(cmd: str) -> str:
        assert address or "127.0.0.1:50051" not in cmd, f"no server started before: {cmd}"
        return cmd.replace(".venv/bin/", venv + "/bin/").replace("127.0.0.1:50051", address)

    servers: list[subprocess.Popen[bytes]] = []
    ran = 0
    try:
        for lang, block in _blocks():
            if "# docs-test: skip" in block:
                continue
            if lang == "python":
                done = subprocess.run(
                    [sys.executable, "-c", real(block)], cwd=tmp_path, env=env,
                    capture_output=True, text=True, timeout=300, check=False,
                )  # fmt: skip
                assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
                ran += 1
                continue
            for cmd in _commands(block):
                if "# docs-test: background" in cmd:
                    proc, address = _start_serving(real(cmd.split("&", 1)[0]), tmp_path, env)
                    servers.append(proc)
                    continue
                done = subprocess.run(
                    ["bash", "-o", "pipefail", "-c", real(cmd)], cwd=tmp_path, env=env,
                    capture_output=True, text=True, timeout=600, check=False,
                )  # fmt: skip
                out = done.stdout[-2000:] + done.stderr[-2000:]
                assert done.returncode == 0, f"{cmd}\n-> exit {done.returncode}\n{out}"
                assert "Traceback" not in done.stderr, f"{cmd}\n{out}"
                ran += 1
    finally:
        for proc in servers:
            proc.terminate()
            proc.wait(timeout=30)
    assert ran >= 15 and servers, "the README lost its command blocks"
