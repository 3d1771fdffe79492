"""The bubblewrap backend (the embedded default).

Example (needs bubblewrap)::

    from sandboxes import BwrapSandbox, Program
    with BwrapSandbox() as box:
        print(box.run(Program(argv=("python3", "-c", "import os; print(os.getpid())"))).stdout)
        # b'2\\n': pid 1 is the trusted zygote of a PID namespace of its own

Each worker is one ``bwrap`` process tree: new user, PID, IPC, UTS, mount, cgroup and network
namespaces (no network device but a down loopback), no nested user namespaces, ``/usr``
read-only (nothing else of the host: no certd data directory, keys, ``/etc`` or ``/home``), a
read-only ``/proc/sys`` (no sysctl of the namespaces can be changed by a run), a cleared
environment, size-capped tmpfs at ``/work``, ``/tmp`` and ``/dev/shm``, a fresh
``/proc`` of the namespace, the seccomp deny list of :mod:`sandboxes.seccomp`, all capabilities
dropped. When certd runs as root each worker also runs under a uid of its own (so RLIMIT_NPROC
counts only that worker's processes) inside a per-worker cgroup with memory, pids and CPU
limits (v2, or v1 where that is what the machine has). Killing the outer ``bwrap`` kills the
namespace's pid 1 (``--die-with-parent``), which makes the kernel kill every process in it.
"""

from __future__ import annotations

import itertools
import os
import queue
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from .base import Sandbox
from .cgroups import CgroupSupport, WorkerCgroup, probe_cgroups
from .errors import SandboxProtocolError, SandboxUnavailableError
from .limits import Limits
from .seccomp import deny_list_filter
from .worker import Transport, Worker

__all__ = ["BwrapOptions", "BwrapSandbox", "ProcessTransport"]

_MIB = 2**20
_ZYGOTE_OVERHEAD_BYTES = 96 * _MIB


@dataclass(frozen=True)
class BwrapOptions:
    """Settings of the bwrap backend.

    Attributes:
        bwrap: Path of the bubblewrap binary.
        python: The sandbox's interpreter (system Python; it sees only ``/usr``).
        system_dirs: Host directories bound read-only at the same path.
        use_cgroups: Put each worker in a cgroup with memory, pids and CPU limits when possible.
        cpus: CPUs one worker's processes may use together (the cgroup's CPU quota).
        use_seccomp: Install the seccomp deny list when the machine supports it.
        uid_base: First host uid for workers when running as root (one uid per worker slot).
        uid_slots: How many distinct worker uids to cycle through.
    """

    bwrap: str = "/usr/bin/bwrap"
    python: str = "/usr/bin/python3"
    system_dirs: tuple[str, ...] = ("/usr",)
    use_cgroups: bool = True
    cpus: float = 1.0
    use_seccomp: bool = True
    uid_base: int = 200_000
    uid_slots: int = 4096


class _Launcher:
    """One long-lived thread that starts every bwrap process.

    ``bwrap --die-with-parent`` uses PR_SET_PDEATHSIG, which fires when the *thread* that
    forked the sandbox exits, not the process. Workers are started from short-lived threads
    (pool refills, gRPC handlers), so all forks happen on this thread, which lives as long as
    the process.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="bwrap-launcher", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            fn, fut = self._jobs.get()
            try:
                fut.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                fut.set_exception(exc)

    def call(self, fn: Callable[[], Any]) -> Any:
        fut: Future[Any] = Future()
        self._jobs.put((fn, fut))
        return fut.result()


_LAUNCHER: _Launcher | None = None
_LAUNCHER_LOCK = threading.Lock()


def _popen(argv: list[str], pass_fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
    """Start a sandbox process: pipes for the zygote protocol, its own session, a bare PATH."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=pass_fds,
        start_new_session=True,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )


def _launcher() -> _Launcher:
    global _LAUNCHER
    with _LAUNCHER_LOCK:
        if _LAUNCHER is None:
            _LAUNCHER = _Launcher()
        return _LAUNCHER


class ProcessTransport(Transport):
    """A transport over a local process's stdin/stdout (the outer ``bwrap``)."""

    def __init__(self, proc: subprocess.Popen[bytes], cgroup: WorkerCgroup | None) -> None:
        """Wrap a started process.

        Args:
            proc: The process, started with stdin/stdout pipes in a session of its own.
            cgroup: Its cgroup, removed on kill.
        """
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.cgroup = cgroup
        self._in = proc.stdin.fileno()
        self._out = proc.stdout.fileno()
        self._killed = False
        self._kill_lock = threading.Lock()

    def send(self, data: bytes) -> None:
        """Write all of ``data`` to the zygote.

        Args:
            data: The frame.

        Raises:
            SandboxProtocolError: The sandbox is gone.
        """
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._in, view) :]
        except OSError as exc:
            raise SandboxProtocolError(f"worker closed its input: {exc}") from exc

    def recv_exact(self, n: int, deadline: float) -> bytes:
        """Read exactly ``n`` bytes before ``deadline``.

        Args:
            n: Bytes wanted.
            deadline: A ``time.monotonic()`` value.

        Returns:
            The bytes.

        Raises:
            SandboxProtocolError: End of stream or timeout.
        """
        chunks: list[bytes] = []
        got = 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxProtocolError("worker did not answer in time")
            ready, _, _ = select.select([self._out], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(self._out, min(n - got, 1 << 20))
            except OSError as exc:
                raise SandboxProtocolError(f"worker output failed: {exc}") from exc
            if not chunk:
                raise SandboxProtocolError("worker exited")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def last_words(self) -> str:
        """What bwrap or the zygote wrote to stderr, once the process has been killed."""
        return self.stderr_tail()

    def stderr_tail(self) -> str:
        """What bwrap or the zygote wrote to stderr, once the process has been killed."""
        if self.proc.stderr is None or not self._killed:
            return ""
        return self.proc.stderr.read(4096).decode(errors="replace").strip()

    def kill(self) -> None:
        """Kill the bwrap session (the namespace dies with it) and remove the cgroup."""
        with self._kill_lock:
            if self._killed:
                return
            self._killed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):  # stderr: see stderr_tail
            if stream is not None:
                stream.close()
        if self.cgroup is not None:
            for _ in range(50):  # the namespace's processes die asynchronously
                self.cgroup.remove()
                if not any(d.exists() for d in self.cgroup.dirs):
                    break
                time.sleep(0.01)


class BwrapSandbox(Sandbox):
    """Sandboxes built with bubblewrap (the embedded default)."""

    name = "bwrap"
    _slots = itertools.count()

    def __init__(self, limits: Limits | None = None, options: BwrapOptions | None = None) -> None:
        """Check that bubblewrap and the interpreter exist.

        Args:
            limits: The ceiling (default and largest per-run limits).
            options: Backend settings.

        Raises:
            SandboxUnavailableError: bubblewrap or the sandbox interpreter is missing.
        """
        super().__init__(limits)
        self.options = options or BwrapOptions()
        if not (shutil.which(self.options.bwrap) and os.access(self.options.bwrap, os.X_OK)):
            raise SandboxUnavailableError(
                f"bubblewrap not found at {self.options.bwrap} (apt-get install bubblewrap)"
            )
        if not os.access(self.options.python, os.X_OK):
            raise SandboxUnavailableError(f"sandbox interpreter {self.options.python} is missing")
        self.cgroups = (
            probe_cgroups()
            if self.options.use_cgroups and os.geteuid() == 0
            else CgroupSupport(None, "disabled" if not self.options.use_cgroups else "not root")
        )
        self.seccomp = deny_list_filter() if self.options.use_seccomp else None

    def command(self, seccomp_fd: int | None) -> list[str]:
        """The ``bwrap`` command line of one worker.

        Args:
            seccomp_fd: The fd carrying the BPF program, or None for no seccomp filter.

        Returns:
            The argv.
        """
        lim = self.limits
        argv = [
            self.options.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--as-pid-1",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--uid",
            "1000",
            "--gid",
            "1000",
            "--hostname",
            "sandbox",
        ]
        for d in self.options.system_dirs:
            argv += ["--ro-bind", d, d]
        for link, target in (("/bin", "usr/bin"), ("/lib", "usr/lib"), ("/sbin", "usr/sbin")):
            argv += ["--symlink", target, link]
        if os.path.isdir("/usr/lib64"):
            argv += ["--symlink", "usr/lib64", "/lib64"]
        argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        # Kernel state by construction: the namespace's sysctls (kernel.shm*, kernel.msg*,
        # kernel.sem, fs.mqueue.*) cannot be written, so no run can leave them to the next.
        argv += ["--ro-bind", "/proc/sys", "/proc/sys"]
        for path, size in (
            ("/work", lim.workdir_bytes),
            ("/tmp", lim.workdir_bytes),
            ("/dev/shm", 4 * _MIB),
        ):
            argv += ["--perms", "1777", "--size", str(size), "--tmpfs", path]
        argv += ["--mqueue", "/dev/mqueue"]  # so the zygote can list and remove message queues
        argv += ["--remount-ro", "/dev"]  # device nodes and symlinks stay what bwrap made them
        argv += ["--remount-ro", "/"]  # the root tmpfs bwrap builds; /work, /tmp stay writable
        argv += ["--chdir", "/work", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin"]
        argv += ["--setenv", "LANG", "C.UTF-8"]
        if seccomp_fd is not None:
            argv += ["--seccomp", str(seccomp_fd)]
        argv += ["--", self.options.python, "-I", "-S", "-c", self._source]
        return argv

    def _cgroup(self) -> tuple[WorkerCgroup | None, list[str]]:
        """A worker's own cgroup, and the argv prefix that moves the sandbox into it.

        ``(None, [])`` where cgroups are not available.

        Raises:
            SandboxUnavailableError: the cgroup cannot be created.
        """
        if self.cgroups.version is None:
            return None, []
        lim = self.limits
        try:
            cgroup = WorkerCgroup(
                self.cgroups,
                memory_bytes=lim.memory_bytes + 2 * lim.workdir_bytes + _ZYGOTE_OVERHEAD_BYTES,
                pids=lim.processes + 4,
                cpus=self.options.cpus,
            )
        except OSError as exc:
            raise SandboxUnavailableError(f"cannot create the worker cgroup: {exc}") from exc
        join = "".join('echo $$ > "$1" && shift && ' for _ in cgroup.procs_files)
        return cgroup, ["/bin/sh", "-c", join + 'exec "$@"', "sh", *cgroup.procs_files]

    def _memory_setter(self, cgroup: WorkerCgroup | None) -> Callable[[Limits], bool] | None:
        """Sets the worker cgroup's memory cap for one run's limits (None without a cgroup)."""
        if cgroup is None:
            return None
        extra = 2 * self.limits.workdir_bytes + _ZYGOTE_OVERHEAD_BYTES  # tmpfs, pid 1, template
        return lambda run: cgroup.set_memory(run.memory_bytes + extra)

    def _seccomp_fd(self) -> int | None:
        """A memfd holding the seccomp filter, read from its start (the caller closes it)."""
        if self.seccomp is None:
            return None
        fd = os.memfd_create("forkgate-seccomp", 0)
        os.write(fd, self.seccomp)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def start_worker(self) -> Worker:
        """Start one bwrap sandbox running the zygote.

        Returns:
            A ready worker.

        Raises:
            SandboxUnavailableError: bwrap could not start.
            SandboxProtocolError: The zygote did not greet.
        """
        lim = self.limits
        cgroup, prefix = self._cgroup()
        dedicated_uid = os.geteuid() == 0
        if dedicated_uid:
            uid = str(self.options.uid_base + next(self._slots) % self.options.uid_slots)
            prefix += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        seccomp_fd = self._seccomp_fd()
        pass_fds = () if seccomp_fd is None else (seccomp_fd,)
        argv = prefix + self.command(seccomp_fd)
        try:
            proc = _launcher().call(lambda: _popen(argv, pass_fds))
        except OSError as exc:
            if cgroup is not None:
                cgroup.remove()
            raise SandboxUnavailableError(f"cannot start bwrap: {exc}") from exc
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        transport = ProcessTransport(proc, cgroup)
        try:
            return Worker(
                transport,
                lim,
                nproc=lim.processes if dedicated_uid else None,
                oom_kills=cgroup.oom_kills if cgroup is not None else None,
                cpu_seconds=cgroup.cpu_seconds if cgroup is not None else None,
                set_memory=self._memory_setter(cgroup),
            )
        except SandboxProtocolError as exc:
            raise SandboxProtocolError(f"{exc}: {transport.stderr_tail()}") from exc
