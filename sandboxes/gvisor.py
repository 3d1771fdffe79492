"""The gVisor backend (strict mode): a fresh guest kernel for every check.

Example (needs ``runsc``: ``apt-get install runsc``)::

    from sandboxes import Program
    from sandboxes.gvisor import GvisorSandbox
    with GvisorSandbox() as box:
        print(box.run(Program(argv=("python3", "-c", "print(6 * 7)"))).stdout)  # b'42\\n'

Each worker is one ``runsc --network=none run`` sandbox: gVisor's Sentry, a user-space kernel
of its own, answers every system call of the programs inside, so no kernel state (sysctls,
IPC objects, scheduler and I/O classes, rlimits of pid 1, …) is shared with the host or with
another check. A worker runs exactly one check (``Sandbox.fresh_per_run``): the pool replaces
it afterwards, so even state of the Sentry itself never reaches the next check.

The sandbox sees what a bwrap worker sees: ``/usr`` read-only (with ``/bin``, ``/lib`` links
into it and ``/etc/ld.so.cache``), size-capped tmpfs at ``/work``, ``/tmp`` and ``/dev/shm``,
gVisor's own ``/proc`` and ``/dev``, no network at all, uid 1000 with no capabilities and
``no_new_privs``; the root is an empty read-only directory, so nothing else of the host (no
certd data directory, keys, ``/etc`` or ``/home``). The trusted zygote runs as pid 1 and
enforces the per-run limits as in the other backends (RLIMIT_CPU, RLIMIT_AS, RLIMIT_NPROC,
…, which the Sentry implements). When certd runs as root, runsc also puts the sandbox in a
cgroup with a memory limit. Platform: ``ptrace`` by default (no KVM needed); ``systrap`` on a
runsc new enough to have it.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import Sandbox
from .bwrap import ProcessTransport
from .errors import SandboxProtocolError, SandboxUnavailableError
from .limits import Limits
from .worker import Worker

__all__ = ["GvisorOptions", "GvisorSandbox"]

_log = logging.getLogger("sandboxes.gvisor")
_MIB = 2**20
_CGROUP_PARENT = "forkgate-gvisor"
_SENTRY_OVERHEAD_BYTES = 256 * _MIB  # the Sentry and gofer beside the programs' memory


@dataclass(frozen=True)
class GvisorOptions:
    """Settings of the gVisor backend.

    Attributes:
        runsc: Path of the runsc binary.
        platform: runsc's platform (``ptrace`` works without KVM, as root or not).
        python: The sandbox's interpreter (system Python under ``/usr``).
        system_dirs: Host directories bound read-only at the same path.
        use_cgroups: Let runsc put each sandbox in a memory-limited cgroup (as root only).
    """

    runsc: str = "/usr/bin/runsc"
    platform: str = "ptrace"
    python: str = "/usr/bin/python3"
    system_dirs: tuple[str, ...] = ("/usr",)
    use_cgroups: bool = True


class RunscTransport(ProcessTransport):
    """The pipe to one ``runsc run``; killing it also deletes the container and its bundle."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        runsc: list[str],
        container: str,
        bundle: Path,
        pending: set[threading.Thread],
    ) -> None:
        super().__init__(proc, None)
        self._runsc = runsc
        self._container = container
        self._bundle = bundle
        self._pending = pending  # the backend's deletions in flight, joined on close

    def kill(self) -> None:
        """Kill the runsc session (the Sentry and gofer are in it), then, in the background,
        delete the container's state and cgroup and its bundle (``runsc delete`` takes ~1 s,
        which the next check should not wait for)."""
        first = not self._killed
        super().kill()
        if first:
            thread = threading.Thread(target=self._delete, name="runsc-delete", daemon=True)
            self._pending.add(thread)
            thread.start()

    def _delete(self) -> None:
        try:
            subprocess.run(
                [*self._runsc, "delete", "--force", self._container],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            _log.warning("runsc delete %s: %s", self._container, exc)
        for cgroup in Path("/sys/fs/cgroup").glob(f"*/{_CGROUP_PARENT}/{self._container}"):
            try:
                cgroup.rmdir()  # its processes are dead; runsc leaves it after a kill
            except OSError as exc:
                _log.warning("cannot remove %s: %s", cgroup, exc)
        shutil.rmtree(self._bundle, ignore_errors=True)
        self._pending.discard(threading.current_thread())


class GvisorSandbox(Sandbox):
    """Sandboxes on gVisor (``runsc``), one fresh sandbox per check."""

    name = "gvisor"
    fresh_per_run = True
    _ids = itertools.count()

    def __init__(self, limits: Limits | None = None, options: GvisorOptions | None = None) -> None:
        """Check that runsc and the interpreter exist; prepare the empty root.

        Args:
            limits: The ceiling (default and largest per-run limits).
            options: Backend settings.

        Raises:
            SandboxUnavailableError: runsc or the sandbox interpreter is missing.
        """
        super().__init__(limits)
        self.options = options or GvisorOptions()
        if not (shutil.which(self.options.runsc) and os.access(self.options.runsc, os.X_OK)):
            raise SandboxUnavailableError(
                f"runsc not found at {self.options.runsc} (apt-get install runsc)"
            )
        if not os.access(self.options.python, os.X_OK):
            raise SandboxUnavailableError(f"sandbox interpreter {self.options.python} is missing")
        self._home = Path(tempfile.mkdtemp(prefix="forkgate-gvisor-"))
        self._root = self._home / "root"
        self._state = self._home / "state"
        self._state.mkdir(mode=0o700)
        _empty_root(self._root, self.options.system_dirs)
        self._cgroups = self.options.use_cgroups and os.geteuid() == 0
        self._deleting: set[threading.Thread] = set()

    def runsc(self) -> list[str]:
        """The runsc command prefix: private state directory, no network, the platform."""
        return [
            self.options.runsc,
            "--root",
            str(self._state),
            "--network=none",
            f"--platform={self.options.platform}",
        ]

    def spec(self, container: str) -> dict[str, Any]:
        """The OCI runtime spec of one worker (see the module docstring for what it sees).

        Args:
            container: The container id (names its cgroup).

        Returns:
            The ``config.json`` contents.
        """
        lim = self.limits
        mounts: list[dict[str, Any]] = [{"destination": "/proc", "type": "proc", "source": "proc"}]
        for d in self.options.system_dirs:
            mounts.append(
                {"destination": d, "type": "bind", "source": d, "options": ["rbind", "ro"]}
            )
        if os.path.exists("/etc/ld.so.cache"):
            mounts.append(
                {
                    "destination": "/etc/ld.so.cache",
                    "type": "bind",
                    "source": "/etc/ld.so.cache",
                    "options": ["bind", "ro"],
                }
            )
        for path, size in (
            ("/work", lim.workdir_bytes),
            ("/tmp", lim.workdir_bytes),
            ("/dev/shm", 4 * _MIB),
        ):
            options = ["nosuid", "nodev", "mode=1777", f"size={size}"]
            mounts.append(
                {"destination": path, "type": "tmpfs", "source": "tmpfs", "options": options}
            )
        linux: dict[str, Any] = {
            "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")]
        }
        if self._cgroups:
            memory = lim.memory_bytes + 2 * lim.workdir_bytes + _SENTRY_OVERHEAD_BYTES
            linux["resources"] = {"memory": {"limit": memory}}
            linux["cgroupsPath"] = f"/{_CGROUP_PARENT}/{container}"
        caps: dict[str, list[str]] = {
            k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")
        }
        argv = [self.options.python, "-I", "-S", "-c", self._source, "--fresh-kernel"]
        return {
            "ociVersion": "1.0.0",
            "process": {
                "terminal": False,
                "user": {"uid": 1000, "gid": 1000},
                "args": argv,
                "env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"],
                "cwd": "/work",
                "noNewPrivileges": True,
                "capabilities": caps,
            },
            "root": {"path": str(self._root), "readonly": True},
            "hostname": "sandbox",
            "mounts": mounts,
            "linux": linux,
        }

    def start_worker(self) -> Worker:
        """Start one gVisor sandbox running the zygote.

        Returns:
            A ready worker (for one check).

        Raises:
            SandboxUnavailableError: runsc could not start.
            SandboxProtocolError: The zygote did not greet.
        """
        lim = self.limits
        container = f"fg-{os.getpid()}-{next(self._ids)}-{uuid.uuid4().hex[:8]}"
        bundle = Path(tempfile.mkdtemp(prefix="bundle-", dir=self._home))
        (bundle / "config.json").write_text(json.dumps(self.spec(container)))
        runsc = self.runsc()
        try:
            proc = subprocess.Popen(
                [*runsc, "run", "--bundle", str(bundle), container],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            )
        except OSError as exc:
            shutil.rmtree(bundle, ignore_errors=True)
            raise SandboxUnavailableError(f"cannot start runsc: {exc}") from exc
        transport = RunscTransport(proc, runsc, container, bundle, self._deleting)
        try:
            return Worker(transport, lim, nproc=lim.processes)
        except SandboxProtocolError as exc:
            raise SandboxProtocolError(f"{exc}: {transport.stderr_tail()}") from exc

    def close(self) -> None:
        """Wait for containers being deleted, then remove the root and state directories."""
        for thread in list(self._deleting):
            thread.join(timeout=60)
        shutil.rmtree(self._home, ignore_errors=True)


def _empty_root(root: Path, system_dirs: tuple[str, ...]) -> None:
    """An empty root: mount points and the /bin, /lib, /sbin links into /usr, nothing else."""
    for d in ("work", "tmp", "proc", "dev", "etc", *(s.strip("/") for s in system_dirs)):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "etc" / "ld.so.cache").touch()
    for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("sbin", "usr/sbin")):
        (root / link).symlink_to(target)
    if os.path.isdir("/usr/lib64"):
        (root / "lib64").symlink_to("usr/lib64")
    os.chmod(root, 0o755)
    for p in (root.parent,):
        os.chmod(p, 0o711)  # runsc's gofer opens the root as the sandbox's user
