"""No child process of ``certd serve`` outlives it, whether it ends by SIGTERM or SIGKILL.

A real ``certd serve`` runs its Countdown pool (forkserver + 2 workers, and multiprocessing's
resource tracker), its math pool (2 workers) and the code domain's bwrap sandbox pool, each
used once. Every descendant process is listed from /proc while it serves; after the signal,
each must be gone within a bounded wait.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from wait_helpers import wait_until

from certd.signing.keys import SigningKey, save_signing_key
from forkgate import CertdClient

ROOT = Path(__file__).resolve().parents[2]
COUNTDOWN = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}
MATH = {"domain": "math", "gold": "3"}
CODE = {
    "domain": "code",
    "language": "python",
    "cases": [{"stdin": "2 3\n", "stdout": "5\n"}],
    "compare": "whitespace",
}


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` in the parent tree (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def serve(tmp: Path) -> tuple[subprocess.Popen[str], str]:
    key = SigningKey.generate("forkgate.test/orphans")
    save_signing_key(tmp / "signing.key", key)
    cfg = {
        "key_name": "forkgate.test/orphans",
        "countdown": {"verify_workers": 2, "verify_pool_min_batch": 2},
        "math": {"workers": 2, "warm_start": True, "first_step": False},
    }
    (tmp / "config.json").write_text(json.dumps(cfg))
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "certd.cli", "serve", "--data-dir", str(tmp),
            "--listen", "127.0.0.1:0", "--config", str(tmp / "config.json"), "--json",
        ],
        stdout=subprocess.PIPE, stderr=(tmp / "serve.log").open("w"), text=True, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, (tmp / "serve.log").read_text()[-3000:]
    return proc, json.loads(line)["address"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_no_child_survives_its_certd(tmp_path: Path, sig: signal.Signals) -> None:
    proc, address = serve(tmp_path)
    try:
        with CertdClient(address) as c:
            c.verify_batch([(COUNTDOWN, "(25-5)*4+3")] * 8)  # the pool's workers
            c.verify_batch([(MATH, r"\boxed{3}")])
            c.verify_batch([(CODE, "```python\nprint(5)\n```")])
        kids = descendants(proc.pid)
        assert len(kids) >= 6, kids  # forkserver, 2 + 2 workers, tracker, a sandbox
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
        wait_until(
            lambda: not {p for p in kids if alive(p)},
            timeout=20,
            interval=0.1,
            what=f"every descendant of certd gone: {[p for p in kids if alive(p)]}",
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
