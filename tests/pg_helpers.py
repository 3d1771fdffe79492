"""Real PostgreSQL 15 servers for tests: a temp dir, a free loopback port, run as ``postgres``.

A ``PgServer`` is Debian's PostgreSQL 15 (``/usr/lib/postgresql/15/bin``) started with
``initdb`` and ``pg_ctl`` in a directory of its own, trusted on 127.0.0.1 only. ``standby()``
clones it with ``pg_basebackup -R`` into a streaming standby; with ``synchronous=True`` the
primary names it in ``synchronous_standby_names`` so each commit waits for its flush.
Tests skip (with the reason) only when PostgreSQL is not installed.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from redis_helpers import free_port

__all__ = ["PG_BIN", "PgServer", "pg_available"]

PG_BIN = Path(os.environ.get("FORKGATE_PG_BIN", "/usr/lib/postgresql/15/bin"))
_USER = "postgres"


def pg_available() -> str | None:
    """None when PostgreSQL can run here, else why not."""
    if not (PG_BIN / "initdb").is_file():
        return f"PostgreSQL 15 is not installed ({PG_BIN}/initdb; apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(_USER)
        except KeyError:
            return "running as root and there is no 'postgres' user to run PostgreSQL as"
    return None


def _as_user() -> dict[str, Any]:
    """Popen arguments that run as ``postgres`` when root (initdb and postgres refuse root)."""
    if os.geteuid() != 0:
        return {}
    pw = pwd.getpwnam(_USER)
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": [], "cwd": "/"}


def _run(args: list[str], timeout: float = 60) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **_as_user())
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")


class PgServer:
    """One PostgreSQL server on 127.0.0.1 with its data directory under ``root``."""

    def __init__(self, root: Path, name: str = "primary") -> None:
        self.root = root
        self.name = name
        self.data = root / name
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def make_root(cls) -> Path:
        """A temp dir the ``postgres`` user owns (pytest's tmp_path is root's, mode 0700)."""
        reason = pg_available()
        if reason is not None:
            pytest.skip(reason)
        root = Path(tempfile.mkdtemp(prefix="forkgate-pg-"))
        if os.geteuid() == 0:
            pw = pwd.getpwnam(_USER)
            os.chown(root, pw.pw_uid, pw.pw_gid)
        return root

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, *others: PgServer) -> str:
        """``postgresql://`` URL of this server (and ``others``, tried in order)."""
        hosts = ",".join(s.host for s in (self, *others))
        return f"postgresql://{_USER}@{hosts}/postgres?connect_timeout=2"

    def init(self, synchronous_standby: str = "") -> PgServer:
        """initdb, with settings for a fast test server that still fsyncs each commit."""
        initdb = str(PG_BIN / "initdb")
        _run([initdb, "-D", str(self.data), "-A", "trust", "-U", _USER, "-E", "UTF8"])
        conf = (
            "listen_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{self.root}'\n"
            "wal_level = replica\nmax_wal_senders = 4\nhot_standby = on\n"
            "shared_buffers = 32MB\nmax_connections = 60\n"
            f"synchronous_standby_names = '{synchronous_standby}'\n"
        )
        with (self.data / "postgresql.conf").open("a") as f:
            f.write(conf)
        with (self.data / "pg_hba.conf").open("a") as f:
            f.write("host replication all 127.0.0.1/32 trust\n")
        return self

    def start(self) -> PgServer:
        """Start ``postgres`` in the foreground of a child process; wait until it accepts."""
        log = (self.root / f"{self.name}.log").open("ab")
        self.proc = subprocess.Popen(
            [str(PG_BIN / "postgres"), "-D", str(self.data), "-p", str(self.port)],
            stdout=log,
            stderr=log,
            **_as_user(),
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.root / f"{self.name}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"postgres {self.name} exited: {tail}")
            ready = subprocess.run(
                [str(PG_BIN / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                capture_output=True,
            )
            if ready.returncode == 0:
                return self
            time.sleep(0.1)
        raise RuntimeError(f"postgres {self.name} did not accept connections")

    def standby(self, name: str = "standby") -> PgServer:
        """A streaming standby cloned from this server (``pg_basebackup -R``), started.

        It names no synchronous standby of its own, so once promoted it commits alone.
        """
        other = PgServer(self.root, name)
        _run([
            str(PG_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.port), "-U", _USER,
            "-D", str(other.data), "-R", "-X", "stream", "--checkpoint=fast",
            "-d", f"application_name={name}",
        ])  # fmt: skip
        with (other.data / "postgresql.conf").open("a") as f:
            f.write("synchronous_standby_names = ''\n")
        auto = other.data / "postgresql.auto.conf"
        text = auto.read_text()
        if "application_name" not in text:
            conninfo = "primary_conninfo = '"
            text = text.replace(conninfo, f"{conninfo}application_name={name} ")
            auto.write_text(text)
        return other.start()

    def wait_synchronous(self, name: str, timeout_s: float = 30) -> None:
        """Wait until the standby ``name`` is this primary's synchronous standby."""
        sql = f"SELECT sync_state FROM pg_stat_replication WHERE application_name = '{name}'"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.sql(sql) == "sync":
                return
            time.sleep(0.1)
        raise RuntimeError(f"standby {name} did not become synchronous")

    def sql(self, query: str) -> str:
        """Run one query with psql; its output, trimmed."""
        done = subprocess.run(
            [str(PG_BIN / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", _USER,
             "-d", "postgres", "-Atc", query],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr[-1000:]}")
        return done.stdout.strip()

    def promote(self) -> None:
        """``pg_promote()``: this standby becomes a read-write primary (waits until it is).

        Through psql, not ``pg_ctl`` as ``postgres``: a child that changes user is forked
        (not spawned), and a fork while gRPC threads run in this process can crash the child.
        """
        if self.sql("SELECT pg_promote(true, 60)") != "t":
            raise RuntimeError(f"postgres {self.name} was not promoted")

    def kill(self) -> None:
        """SIGKILL the postmaster (its backends exit on their own)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.proc = None

    def stop(self) -> None:
        """Immediate shutdown (SIGQUIT), then SIGKILL if it lingers."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        self.proc = None


def remove_root(root: Path) -> None:
    """Delete a ``make_root`` directory."""
    shutil.rmtree(root, ignore_errors=True)


class PgCluster:
    """A PostgreSQL primary, its synchronous streaming standby and ``n`` certd replicas.

    The replicas' URL lists both servers with ``target_session_attrs=read-write`` (certd adds
    it), so after the standby's promotion they reconnect to it on their own.
    """

    def __init__(self, root: Path, n: int = 2) -> None:
        from cluster_helpers import KEY_NAME, Replica, cluster_config

        from certd.signing.keys import SigningKey, save_signing_key

        self.root = root
        self.pg_root = PgServer.make_root()
        self.primary = PgServer(self.pg_root, "primary")
        self.standby: PgServer | None = None
        self.key = SigningKey.generate(KEY_NAME)
        self.vkey = self.key.verifier().to_vkey()
        self.config = cluster_config()
        self.config["cluster"]["postgres_connect_timeout_s"] = 2.0
        self.replicas: list[Replica] = []
        for i in range(n):
            data = root / f"replica-{i}"
            data.mkdir(parents=True, exist_ok=True)
            save_signing_key(data / "signing.key", self.key)
            self.replicas.append(Replica(data, "", self.config))

    @property
    def url(self) -> str:
        assert self.standby is not None
        return self.primary.url(self.standby)

    def start(self) -> PgCluster:
        self.primary.init(synchronous_standby="standby").start()
        self.standby = self.primary.standby("standby")
        self.primary.wait_synchronous("standby")
        for r in self.replicas:  # side by side, then each one's serving line
            r.ledger_url = self.url
            r.launch()
        for r in self.replicas:
            r.wait_serving()
        return self

    @property
    def addresses(self) -> list[str]:
        return [r.address for r in self.replicas if r.proc is not None]

    def fail_over(self) -> None:
        """SIGKILL the primary and every process it started, then promote the standby."""
        assert self.standby is not None and self.primary.proc is not None
        pid = self.primary.proc.pid
        children = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True
        ).stdout.split()
        self.primary.kill()
        for child in children:
            try:
                os.kill(int(child), signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.standby.promote()

    def audit(self) -> subprocess.CompletedProcess[str]:
        """``certd audit --ledger postgresql://…`` with a fresh auditor state."""
        from cluster_helpers import run_certd

        state = self.root / f"audit-state-{time.monotonic_ns()}.json"
        return run_certd(
            "audit", "--ledger", self.url, "--trust", self.vkey,
            "--state", str(state), "--json",
        )  # fmt: skip

    def close(self) -> None:
        for r in self.replicas:
            r.kill()
        for server in (self.primary, self.standby):
            if server is not None:
                server.stop()
        remove_root(self.pg_root)
