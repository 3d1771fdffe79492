"""A certd cluster as real processes on 127.0.0.1: one Redis, N ``certd serve --ledger`` replicas.

Every replica has its own data dir holding a copy of one signing key (one identity).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from redis_helpers import RedisProcess
from server_helpers import LAZY_MATH_SECTION

from certd.domains import countdown as cd
from certd.ledger.certindex import parse_feasibility_entry
from certd.signing.keys import SigningKey, save_signing_key

__all__ = [
    "IN_FLIGHT",
    "Cluster",
    "Replica",
    "Witness",
    "certify_items",
    "check_acknowledged",
    "cluster_config",
    "run_certd",
]

KEY_NAME = "forkgate.test/cluster"
ROOT = Path(__file__).resolve().parents[1]

IN_FLIGHT = 8 * 4
"""The most items in flight at once (the cluster tests: up to 8 clients, batches of 4): the bound
on entries whose reply a killed process took with it."""


def run_certd(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the ``certd`` CLI in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "certd.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


class Replica:
    """One ``certd serve --ledger redis://…`` process."""

    def __init__(self, data_dir: Path, ledger_url: str, config: dict[str, Any]) -> None:
        self.data_dir = data_dir
        self.ledger_url = ledger_url
        self.config = config
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""

    def start(self) -> Replica:
        """Start the process and wait for its ``serving`` line."""
        return self.launch().wait_serving()

    def launch(self) -> Replica:
        """Start the process without waiting: replicas launched together start side by side
        (each spends seconds importing before it serves), then ``wait_serving`` each."""
        cfg_path = self.data_dir / "config.json"
        cfg_path.write_text(json.dumps(self.config))
        with (self.data_dir / "serve.log").open("a") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "certd.cli", "serve",
                    "--data-dir", str(self.data_dir),
                    "--listen", "127.0.0.1:0",
                    "--ledger", self.ledger_url,
                    "--config", str(cfg_path),
                    "--json",
                ],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        return self

    def wait_serving(self) -> Replica:
        """Read the launched process's first line: its ``serving`` event and address."""
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=10)
            tail = (self.data_dir / "serve.log").read_text()[-3000:]
            raise RuntimeError(f"certd replica exited with {self.proc.returncode}: {tail}")
        event = json.loads(line)
        assert event["event"] == "serving", event
        self.address = event["address"]
        return self

    def kill(self) -> None:
        """SIGKILL: no drain, no flush."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.proc = None

    def stop(self) -> None:
        """SIGTERM: graceful shutdown."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


def cluster_config() -> dict[str, Any]:
    """The config every test replica runs with (a fresh copy)."""
    return {
        "key_name": KEY_NAME,
        "ledger": {"origin": KEY_NAME},
        "countdown": {"verify_workers": 0},
        "cluster": {"idempotency_claim_s": 2.0, "idempotency_wait_s": 10.0},
        # no cluster test checks math: lazy math, and no first-step κ, whose name a server
        # takes from the SHA-256 of the 91 MB embedding model at start (0.12 CPU-s a replica)
        "math": {**LAZY_MATH_SECTION, "first_step": False},
    }


class Cluster:
    """Redis with AOF (appendfsync always) and ``n`` replicas sharing one signing key."""

    def __init__(self, root: Path, n: int = 3, config: dict[str, Any] | None = None) -> None:
        self.root = root
        self.redis = RedisProcess(root / "redis")
        self.key = SigningKey.generate(KEY_NAME)
        self.config: dict[str, Any] = cluster_config()
        for section, values in (config or {}).items():
            self.config.setdefault(section, {}).update(values)
        self.replicas = [self._replica(i) for i in range(n)]
        self.vkey = self.key.verifier().to_vkey()
        (root / "signing.pub").write_text(self.vkey + "\n")

    def _replica(self, i: int) -> Replica:
        data = self.root / f"replica-{i}"
        data.mkdir(parents=True, exist_ok=True)
        save_signing_key(data / "signing.key", self.key)
        return Replica(data, self.redis.url, self.config)

    def start(self) -> Cluster:
        self.redis.start()
        try:
            for r in self.replicas:  # side by side, then each one's serving line
                r.launch()
            for r in self.replicas:
                r.wait_serving()
        except BaseException:
            self.close()  # no replica outlives a failed start
            raise
        return self

    def revive(self) -> Cluster:
        """Start again every replica a test killed or stopped (a cluster shared by a module's
        tests: each test starts with every replica serving)."""
        for r in self.replicas:
            if r.proc is not None and r.proc.poll() is not None:
                r.proc = None  # exited on its own: start it again too
            if r.proc is None:
                r.start()
        return self

    @property
    def addresses(self) -> list[str]:
        return [r.address for r in self.replicas if r.proc is not None]

    def audit(self, *extra: str) -> subprocess.CompletedProcess[str]:
        """``certd audit --ledger redis://…`` with a fresh auditor state."""
        state = self.root / f"audit-state-{time.monotonic_ns()}.json"
        return run_certd(
            "audit", "--ledger", self.redis.url, "--trust", self.vkey,
            "--state", str(state), "--json", *extra,
        )  # fmt: skip

    def close(self) -> None:
        for r in self.replicas:
            r.kill()
        self.redis.stop()
        shutil.rmtree(self.root / "redis", ignore_errors=True)


def certify_items(puzzles: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str, str]]:
    """(task, label, witness) for the first label of every feasible family of each puzzle."""
    items = []
    for p in puzzles:
        found = cd.enumerate_families(
            cd.CountdownTask(numbers=tuple(p["numbers"]), target=p["target"])
        )
        for family in found.families:
            lw = found.labels[family[0]]
            items.append((p, f"{lw.operand},{lw.operator}", lw.witness))
    return items


class Witness:
    """``certd witness --once`` runs against the cluster, one key and state file across runs."""

    def __init__(self, root: Path, origin: str = KEY_NAME) -> None:
        self.root = root
        self.origin = origin
        self.key = SigningKey.generate("witness.test/cluster")
        root.mkdir(parents=True, exist_ok=True)
        save_signing_key(root / "witness.key", self.key)
        self.state = root / "witness.json"

    def once(self, address: str, log_vkey: str) -> dict[str, Any]:
        """Cosign the log's checkpoint at ``address``; the last JSON line it printed."""
        done = run_certd(
            "witness", "--once", "--json", "--log", address, "--log-key", log_vkey,
            "--origin", self.origin, "--key", str(self.root / "witness.key"),
            "--state", str(self.state),
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def check_acknowledged(
    entry: Callable[[int], bytes],
    size: int,
    certs: dict[str, Any],
    lost_replies: int,
    start: int = 0,
) -> None:
    """Acknowledged certificates: unique indexes in ``[start, size)``, each envelope at its
    index; at most ``lost_replies`` entries of that range without one (named in the failure).

    ``start``: the log's size before the test wrote (a cluster shared by a module's tests).
    """
    indexes = sorted(cert.ledger_index for cert in certs.values())
    assert len(set(indexes)) == len(indexes)  # no duplicate index
    assert not indexes or (indexes[0] >= start and indexes[-1] < size), (start, indexes, size)
    for cert in certs.values():
        assert entry(cert.ledger_index) == cert.envelope
    unacknowledged = sorted(set(range(start, size)) - set(indexes))
    named = [(i, _task_and_label(i, entry(i))) for i in unacknowledged[: lost_replies + 1]]
    assert len(unacknowledged) <= lost_replies, (named, len(unacknowledged), size)


def _task_and_label(index: int, data: bytes) -> tuple[str, str] | None:
    """(task digest, label) of a feasibility entry, to name an unacknowledged one."""
    cert = parse_feasibility_entry(index, data)
    return None if cert is None else (cert.task_digest[:16], cert.label)
