"""The Docker backend (for clusters): one locked-down container per worker, via the Docker SDK.

Example (needs a Docker engine and the runner image, ``make sandbox-image``)::

    from sandboxes.docker import DockerSandbox
    with DockerSandbox() as box:
        print(box.run(Program(argv=("python3", "-c", "print('hi')"))).stdout)

Every worker container runs the same trusted zygote as the bwrap backend, as its pid 1, with:
``network_mode=none``, a read-only root filesystem, size-capped tmpfs at ``/work``, ``/tmp``
(and a small ``/dev/shm``), ``cap_drop=ALL``, ``no-new-privileges``, uid/gid 1000, the seccomp
profile of :func:`sandboxes.seccomp.docker_profile` (the bwrap filter's policy), and a pids,
memory (swap included) and CPU limit; the memory cap is set per run through the container's
cgroup when the host can reach it (so MEMORY_LIMIT comes from the kernel's OOM counter). An
optional OCI runtime (``runsc`` for gVisor) comes from the options. No image is pulled:
``deploy/sandbox-image/build.sh`` builds :data:`DEFAULT_IMAGE` from Debian packages.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._docker_channel import CONTAINER_DIR, CONTAINER_SOCKET, DirectChannel
from .base import Sandbox
from .errors import SandboxProtocolError, SandboxUnavailableError
from .limits import Limits
from .seccomp import docker_profile
from .worker import Transport, Worker

__all__ = ["DEFAULT_IMAGE", "DockerOptions", "DockerSandbox", "DockerTransport"]

DEFAULT_IMAGE = "forkgate/sandbox-runner:1"
"""The runner image ``make sandbox-image`` builds (python3, gcc, g++ on Debian)."""

_MIB = 2**20
_ZYGOTE_OVERHEAD_BYTES = 96 * _MIB
_FRAME = struct.Struct(">BxxxI")


@dataclass(frozen=True)
class DockerOptions:
    """Settings of the Docker backend.

    Attributes:
        image: The runner image (must exist locally; nothing is pulled).
        runtime: OCI runtime name (e.g. ``runsc``), None for the engine's default.
        base_url: Engine address, None for the environment's (``DOCKER_HOST`` or the socket).
        cpus: CPUs one worker may use (``nano_cpus``).
        python: The interpreter inside the image.
        start_timeout_s: How long a container may take to greet.
        direct_channel: Frame over a unix socket bind-mounted into the container
            (:mod:`sandboxes._docker_channel`) rather than the attached stream through the
            engine. Used only with a local engine (no ``base_url``) and the default runtime.
    """

    image: str = DEFAULT_IMAGE
    runtime: str | None = None
    base_url: str | None = None
    cpus: float = 1.0
    python: str = "/usr/bin/python3"
    start_timeout_s: float = 60.0
    direct_channel: bool = True


class _HostCgroup:
    """The container's cgroup as the host sees it (where certd runs beside the engine).

    It gives the OOM-kill counter (MEMORY_LIMIT comes from it), the CPU seconds (host overload
    at the wall limit) and the per-run memory cap. On a remote engine none is found: then
    RLIMIT_AS caps each run and the wall limit is always the program's TIME_LIMIT.
    """

    _ROOT = Path("/sys/fs/cgroup")

    def __init__(self, container_id: str, ceiling_bytes: int) -> None:
        root, cid = self._ROOT, container_id
        v2 = [root / f"system.slice/docker-{cid}.scope", root / "docker" / cid]
        v2 = [d for d in v2 if (d / "memory.events").is_file()]
        self.version = 2 if v2 else 1
        self.memory = v2[0] if v2 else root / "memory" / "docker" / cid
        self.cpu = v2[0] if v2 else root / "cpuacct" / "docker" / cid
        self.memory_max = ceiling_bytes

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = (self.memory / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def cpu_seconds(self) -> float | None:
        try:
            if self.version == 1:
                return int((self.cpu / "cpuacct.usage").read_text()) / 1e9
            for line in (self.cpu / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError):
            return None
        return None

    def set_memory(self, memory_bytes: int) -> bool:
        """Lower (or restore) the container's memory cap for one run; never above the engine's."""
        if memory_bytes == self.memory_max:
            return True
        name = "memory.max" if self.version == 2 else "memory.limit_in_bytes"
        try:
            (self.memory / name).write_text(str(memory_bytes))
        except OSError:
            return False
        self.memory_max = memory_bytes
        return True


class DockerTransport(Transport):
    """A transport to a container's pid 1: its direct channel, or its attached stdin/stdout.

    With a channel (see :mod:`sandboxes._docker_channel`) frames go over that unix socket and
    the attached (multiplexed) stream carries only the zygote's stderr; without one, both
    directions go through the attached stream (remote engines, other OCI runtimes).
    """

    def __init__(self, container: Any, sock: Any, channel: socket.socket | None = None) -> None:
        """Wrap an attached container.

        Args:
            container: The ``docker.models.containers.Container``.
            sock: The socket ``attach_socket`` returned.
            channel: The zygote's connected direct channel, None to frame over ``sock``.
        """
        self.container = container
        self._wrapper = sock
        self._attached: socket.socket = sock._sock if hasattr(sock, "_sock") else sock
        self._channel = channel
        self._sock = channel if channel is not None else self._attached
        self._raw = bytearray()  # bytes read from the socket, not yet demultiplexed
        self._out = bytearray()  # demultiplexed stdout bytes not yet consumed
        self._pending = 0  # bytes left of the current stdout frame
        self._skip = 0  # bytes left of the current stderr frame
        self.stderr_tail = bytearray()
        self._killed = False
        self._kill_lock = threading.Lock()

    def send(self, data: bytes) -> None:
        """Write all of ``data`` to the zygote.

        Args:
            data: The frame.

        Raises:
            SandboxProtocolError: The container is gone.
        """
        try:
            self._sock.settimeout(None)
            self._sock.sendall(data)
        except OSError as exc:
            raise SandboxProtocolError(f"container closed its input: {exc}") from exc

    def _read_some(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SandboxProtocolError("container did not answer in time")
        self._sock.settimeout(left)
        try:
            chunk = self._sock.recv(1 << 20)
        except TimeoutError as exc:
            raise SandboxProtocolError("container did not answer in time") from exc
        except OSError as exc:
            raise SandboxProtocolError(f"container output failed: {exc}") from exc
        if not chunk:
            raise SandboxProtocolError("container exited")
        return chunk

    def _parse(self) -> None:
        """Move complete or partial stdout frame payloads from ``_raw`` to ``_out``."""
        while self._raw:
            if self._pending == 0 and self._skip == 0:
                if len(self._raw) < _FRAME.size:
                    return
                stream, size = _FRAME.unpack_from(self._raw)
                del self._raw[: _FRAME.size]
                if stream == 1:
                    self._pending = size
                else:
                    self._skip = size
                continue
            if self._skip:
                k = min(self._skip, len(self._raw))
                self.stderr_tail = (self.stderr_tail + self._raw[:k])[-4096:]
                self._skip -= k
            else:
                k = min(self._pending, len(self._raw))
                self._out += self._raw[:k]
                self._pending -= k
            del self._raw[:k]

    def recv_exact(self, n: int, deadline: float) -> bytes:
        """Read exactly ``n`` bytes of the zygote's stdout before ``deadline``.

        Args:
            n: Bytes wanted.
            deadline: A ``time.monotonic()`` value.

        Returns:
            The bytes.

        Raises:
            SandboxProtocolError: End of stream or timeout.
        """
        while len(self._out) < n:
            if self._channel is not None:
                self._out += self._read_some(deadline)
                continue
            self._raw += self._read_some(deadline)
            self._parse()
        data = bytes(self._out[:n])
        del self._out[:n]
        return data

    def last_words(self) -> str:
        """What the zygote wrote to stderr before the container went."""
        return self.stderr_tail.decode(errors="replace").strip()

    def _drain_stderr(self, deadline: float) -> None:
        """Read the attached (stderr-only) stream until its end or ``deadline``."""
        while (left := deadline - time.monotonic()) > 0:
            try:
                self._attached.settimeout(left)
                chunk = self._attached.recv(1 << 16)
            except OSError:
                return
            if not chunk:
                return
            self._raw += chunk
            self._parse()

    def kill(self) -> None:
        """Kill and remove the container (every process in it dies with its pid 1)."""
        with self._kill_lock:
            if self._killed:
                return
            self._killed = True
        if self._channel is not None:
            self._channel.close()
        else:
            self._close_attached()
        try:
            self.container.remove(force=True)
        except Exception as exc:
            if "No such container" not in str(exc) and "already in progress" not in str(exc):
                raise SandboxProtocolError(f"cannot remove container: {exc}") from exc
        finally:
            if self._channel is not None:  # the stream ends with the container: keep its words
                self._drain_stderr(time.monotonic() + 1.0)
                self._close_attached()

    def _close_attached(self) -> None:
        try:
            self._wrapper.close()
        except OSError:
            pass


class DockerSandbox(Sandbox):
    """Sandboxes built as locked-down containers of a real Docker engine."""

    name = "docker"

    def __init__(self, limits: Limits | None = None, options: DockerOptions | None = None) -> None:
        """Connect to the engine and check the image.

        Args:
            limits: The ceiling (default and largest per-run limits).
            options: Backend settings.

        Raises:
            SandboxUnavailableError: No engine, or the image is missing.
        """
        super().__init__(limits)
        self.options = options or DockerOptions()
        try:
            import docker
            import docker.errors
        except ImportError as exc:
            raise SandboxUnavailableError("the Docker SDK is missing (pip install docker)") from exc
        try:
            self.client = (
                docker.DockerClient(base_url=self.options.base_url)
                if self.options.base_url
                else docker.from_env()
            )
            self.client.ping()
        except docker.errors.DockerException as exc:
            raise SandboxUnavailableError(f"no Docker engine reachable: {exc}") from exc
        try:
            self.client.images.get(self.options.image)
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailableError(
                f"runner image {self.options.image} is missing: run `make sandbox-image` "
                "(deploy/sandbox-image/build.sh)"
            ) from exc
        except docker.errors.DockerException as exc:
            raise SandboxUnavailableError(f"cannot inspect {self.options.image}: {exc}") from exc
        self._errors = docker.errors

    def container_config(self) -> dict[str, Any]:
        """The ``containers.create`` keyword arguments of one worker.

        Returns:
            The settings (inspectable in tests).
        """
        lim = self.limits
        memory = lim.memory_bytes + 2 * lim.workdir_bytes + _ZYGOTE_OVERHEAD_BYTES
        tmpfs_opts = "rw,exec,nosuid,nodev,mode=1777,size={}"
        config: dict[str, Any] = {
            "image": self.options.image,
            "command": [self.options.python, "-I", "-S", "-c", self._source],
            "stdin_open": True,
            "tty": False,
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {
                "/work": tmpfs_opts.format(lim.workdir_bytes),
                "/tmp": tmpfs_opts.format(lim.workdir_bytes),
            },
            "shm_size": 4 * _MIB,
            "cap_drop": ["ALL"],
            # The same policy as bwrap's filter (sandboxes.seccomp), not the engine's default.
            "security_opt": ["no-new-privileges", "seccomp=" + docker_profile()],
            "user": "1000:1000",
            "working_dir": "/work",
            "environment": {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            "hostname": "sandbox",
            "pids_limit": lim.processes + 4,
            "mem_limit": memory,
            "memswap_limit": memory,
            "nano_cpus": int(self.options.cpus * 1e9),
            "ipc_mode": "private",
            # IPC-namespace limits: SysV shared memory is not charged to a process's RLIMIT_AS
            # once detached, so cap what a run can create (and pid 1 removes it after the run).
            "sysctls": {
                "kernel.shmmax": str(lim.memory_bytes),
                "kernel.shmall": str(lim.memory_bytes // 4096),
                "kernel.shmmni": "64",
                "fs.mqueue.queues_max": "64",
            },
            "log_config": {"type": "none", "config": {}},
            "labels": {"forkgate.sandbox": "worker"},
        }
        if self.options.runtime:
            config["runtime"] = self.options.runtime
        return config

    def uses_direct_channel(self) -> bool:
        """Whether workers frame over a direct channel (local engine, default runtime)."""
        opts = self.options
        return opts.direct_channel and opts.base_url is None and opts.runtime is None

    def start_worker(self) -> Worker:
        """Create, attach and start one worker container.

        Returns:
            A ready worker.

        Raises:
            SandboxUnavailableError: The engine refused the container.
            SandboxProtocolError: The zygote did not greet.
        """
        channel = DirectChannel.open() if self.uses_direct_channel() else None
        try:
            transport = self._start_container(channel)
        finally:
            if channel is not None:
                channel.close()
        lim = self.limits
        extra = 2 * lim.workdir_bytes + _ZYGOTE_OVERHEAD_BYTES
        host = _HostCgroup(str(transport.container.id), lim.memory_bytes + extra)
        try:
            return Worker(
                transport,
                lim,
                oom_kills=host.oom_kills,
                cpu_seconds=host.cpu_seconds,
                set_memory=lambda run: host.set_memory(run.memory_bytes + extra),
                start_timeout_s=self.options.start_timeout_s,
            )
        except SandboxProtocolError as exc:
            raise SandboxProtocolError(f"{exc}: {transport.last_words()}") from exc

    def _start_container(self, channel: DirectChannel | None) -> DockerTransport:
        """Create and start the container; with ``channel``, accept its pid 1's connection."""
        config = self.container_config()
        if channel is not None:
            config["command"] = [*config["command"], "--channel=" + CONTAINER_SOCKET]
            config["volumes"] = {str(channel.host_dir): {"bind": CONTAINER_DIR, "mode": "ro"}}
        try:
            container = self.client.containers.create(**config)
        except self._errors.DockerException as exc:
            raise SandboxUnavailableError(f"cannot create the worker container: {exc}") from exc
        frames = channel is None  # stdin/stdout only when frames go through the engine
        try:
            sock = container.attach_socket(
                params={"stdin": int(frames), "stdout": int(frames), "stderr": 1, "stream": 1}
            )
            container.start()
        except self._errors.DockerException as exc:
            container.remove(force=True)
            raise SandboxUnavailableError(f"cannot start the worker container: {exc}") from exc
        if channel is None:
            return DockerTransport(container, sock)
        try:
            container.reload()
            pid = int(container.attrs["State"]["Pid"])
            deadline = time.monotonic() + self.options.start_timeout_s
            conn = channel.accept(pid, deadline, alive=lambda: self._running(container))
        except (SandboxProtocolError, self._errors.DockerException) as exc:
            failed = DockerTransport(container, sock, socket.socket(socket.AF_UNIX))
            failed.kill()
            raise SandboxProtocolError(f"worker channel: {exc}: {failed.last_words()}") from exc
        return DockerTransport(container, sock, conn)

    def _running(self, container: Any) -> bool:
        try:
            container.reload()
        except self._errors.DockerException:
            return False
        return bool(container.status == "running")

    def close(self) -> None:
        """Close the engine connection."""
        self.client.close()
