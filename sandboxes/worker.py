"""The supervisor's side of one sandboxed worker: frames in, typed results out.

Example (needs bubblewrap)::

    from sandboxes import BwrapSandbox, Limits, Program
    with BwrapSandbox(Limits()) as box:
        worker = box.start_worker()
        print(worker.run(Program(argv=("python3", "-c", "print(2 + 2)")), Limits()).stdout)
        worker.kill()

A ``Worker`` owns a transport to the trusted zygote that runs as pid 1 inside the sandbox
(``_zygote.py``). The zygote enforces the per-run limits; the worker enforces a hard deadline on
the zygote itself and kills the whole sandbox (namespace or container) when it is late, dies or
sends anything malformed. Such a worker is broken for good: pools replace it.
"""

from __future__ import annotations

import json
import signal
import struct
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .errors import SandboxProtocolError
from .limits import Limits
from .program import Program
from .result import ExecResult, RawOutcome, classify

__all__ = ["Transport", "Worker", "zygote_source"]

_LEN = struct.Struct(">I")
_GRACE_S = 5.0
_CLEAN_GRACE_S = 15.0  # the zygote gives up emptying after 5 s and says so
_MAX_REPLY = 1 << 28
# A run stopped at the wall limit was starved when its sandbox used less CPU than this share of
# min(wall, CPU limit) and its processes waited for a CPU at least this share of the wall time.
_STARVED_CPU = 0.25
_STARVED_WAIT = 0.5
_TEMPLATE_SLOT = '_TEMPLATE_SOURCE = ""'
_PRELOAD_SLOT = "_PRELOAD: list[str] = []"
_CLEANUP_SLOT = "# @cleanup: worker.zygote_source() inlines the body of sandboxes/_cleanup.py here"
_CLEANUP_MARK = "# ---- inline: worker.zygote_source() copies everything below into the zygote ----"


def zygote_source(preload: Mapping[str, str] | None = None) -> str:
    """The source text of the in-sandbox worker (run with ``python3 -I -S -c``).

    The zygote carries the template's source (``_template.py``) in ``_TEMPLATE_SOURCE``, the
    body of ``_cleanup.py`` in place of its ``# @cleanup`` line, and ``preload`` (module name
    → trusted source, see ``Sandbox.preload``) in ``_PRELOAD`` for the template's argv.
    """
    here = Path(__file__).parent
    zygote = (here / "_zygote.py").read_text()
    template = (here / "_template.py").read_text()
    cleanup = (here / "_cleanup.py").read_text().split(_CLEANUP_MARK, 1)[1]
    for slot in (_TEMPLATE_SLOT, _CLEANUP_SLOT, _PRELOAD_SLOT):
        assert zygote.count(slot) == 1, f"the zygote lost its slot {slot!r}"
    zygote = zygote.replace(_TEMPLATE_SLOT, f"_TEMPLATE_SOURCE = {template!r}")
    flat = [text for item in sorted((preload or {}).items()) for text in item]
    zygote = zygote.replace(_PRELOAD_SLOT, f"_PRELOAD: list[str] = {flat!r}")
    return zygote.replace(_CLEANUP_SLOT, cleanup)


class Transport(ABC):
    """A byte pipe to the zygote. Backends implement it over a process or a container."""

    @abstractmethod
    def send(self, data: bytes) -> None:
        """Write all of ``data``; raise ``SandboxProtocolError`` when the worker is gone."""

    @abstractmethod
    def recv_exact(self, n: int, deadline: float) -> bytes:
        """Read exactly ``n`` bytes before ``time.monotonic()`` reaches ``deadline``.

        Raises ``SandboxProtocolError`` on end of stream or timeout.
        """

    @abstractmethod
    def kill(self) -> None:
        """Kill the whole sandbox (every process in it) and release its resources."""

    def last_words(self) -> str:
        """What the sandbox wrote to stderr (the zygote's traceback), once it is killed."""
        return ""


class Worker:
    """One pre-started sandbox running the zygote; runs programs one at a time."""

    def __init__(
        self,
        transport: Transport,
        ceiling: Limits,
        *,
        nproc: int | None = None,
        oom_kills: Callable[[], int] | None = None,
        cpu_seconds: Callable[[], float | None] | None = None,
        set_memory: Callable[[Limits], bool] | None = None,
        start_timeout_s: float = 30.0,
    ) -> None:
        """Wait for the zygote's greeting.

        Args:
            transport: The pipe to the zygote.
            ceiling: The largest limits this worker accepts (its cgroup/container limits).
            nproc: RLIMIT_NPROC for runs, when the worker has a uid of its own.
            oom_kills: Reads the sandbox's OOM-kill counter, when the backend has one.
            cpu_seconds: Reads the CPU seconds the whole sandbox has used, when the backend
                has a counter (it tells host overload from a slow program at the wall limit).
            set_memory: Sets the sandbox's kernel memory cap for one run's limits; True when
                the kernel took it. Then the kernel's OOM killer enforces the run's memory
                (MEMORY_LIMIT comes from its counter) and the run's address space is not
                capped; otherwise RLIMIT_AS caps it and an allocation failure is the
                program's own error.
            start_timeout_s: How long the zygote may take to start.

        Raises:
            SandboxProtocolError: The zygote did not greet in time (the sandbox is killed).
        """
        self.transport = transport
        self.ceiling = ceiling
        self.runs = 0
        self.broken = False
        self._nproc = nproc
        self._oom_kills = oom_kills
        self._cpu_seconds = cpu_seconds
        self._set_memory = set_memory
        self._lock = threading.Lock()
        try:
            hello = self._recv(time.monotonic() + start_timeout_s)[0]
        except SandboxProtocolError:
            self.kill()
            raise
        if not hello.get("ready"):
            self.kill()
            raise SandboxProtocolError(f"worker refused to start: {hello.get('error', hello)}")

    def kill(self) -> None:
        """Kill the sandbox; the worker cannot be used again."""
        self.broken = True
        self.transport.kill()

    def _recv(self, deadline: float) -> tuple[dict[str, Any], bytes]:
        (total,) = _LEN.unpack(self.transport.recv_exact(4, deadline))
        if total > _MAX_REPLY:
            raise SandboxProtocolError(f"reply of {total} bytes is larger than {_MAX_REPLY}")
        frame = self.transport.recv_exact(total, deadline)
        (head_len,) = _LEN.unpack_from(frame, 0)
        try:
            header = json.loads(frame[4 : 4 + head_len])
        except ValueError as exc:
            raise SandboxProtocolError(f"malformed reply header: {exc}") from exc
        if not isinstance(header, dict):
            raise SandboxProtocolError("malformed reply header: not an object")
        return header, frame[4 + head_len :]

    def run(self, program: Program, limits: Limits) -> ExecResult:
        """Run one program in a fresh process and work directory.

        Args:
            program: What to run.
            limits: Limits for this run; must fit within the worker's ceiling.

        Returns:
            The typed result. A broken worker or a late zygote yields ``SANDBOX_ERROR`` and
            the worker is killed (``broken`` becomes True).
        """
        with self._lock:
            return self._run_locked(program, limits)

    def _run_locked(self, program: Program, limits: Limits) -> ExecResult:
        start = time.monotonic()
        if self.broken:
            return ExecResult.sandbox_error("worker is broken")
        names = sorted(program.files)
        header = {
            "argv": list(program.argv),
            "files": [[n, len(program.files[n]), n in program.executables] for n in names],
            "stdin_len": len(program.stdin),
            "limits": {
                "cpu_time_s": limits.cpu_time_s,
                "wall_time_s": limits.wall_time_s,
                "memory_bytes": limits.memory_bytes,
                "as_bytes": 0 if self._kernel_memory(limits) else limits.memory_bytes,
                "output_bytes": limits.output_bytes,
                "file_size_bytes": limits.file_size_bytes,
                "open_files": limits.open_files,
            },
            "nproc": (limits.processes + 2) if self._nproc else None,  # + pid 1, template
            "inline": program.inline_python and program.argv[0] == "python3",
            "completion": program.completion_channel,
        }
        head = json.dumps(header, separators=(",", ":")).encode()
        body = [_LEN.pack(len(head)), head, *(bytes(program.files[n]) for n in names)]
        body.append(bytes(program.stdin))
        payload = b"".join(body)
        oom_before = self._oom_kills() if self._oom_kills else 0
        cpu_before = self._cpu_seconds() if self._cpu_seconds else None
        self.runs += 1
        try:
            self.transport.send(_LEN.pack(len(payload)) + payload)
            reply, blobs = self._recv(start + limits.wall_time_s + _GRACE_S)
            raw = _raw_outcome(reply, blobs, self._oom_kills, oom_before)
            if raw.killed_for == "wall":
                raw = _overload(raw, reply, self._cpu_used(cpu_before), limits)
        except (SandboxProtocolError, KeyError, TypeError, ValueError) as exc:
            oom = self._oom_kills is not None and self._oom_kills() > oom_before
            self.kill()
            words = self.transport.last_words()[-400:]
            if words:
                exc = SandboxProtocolError(f"{exc}: {words}")
            if oom:  # the kernel's OOM killer took the sandbox during this run: its doing
                return classify(_oom_outcome(time.monotonic() - start), limits)
            return ExecResult.sandbox_error(
                f"worker failed: {exc}", wall_time_s=time.monotonic() - start, during_run=True
            )
        left = self._await_clean()
        if left:
            raw = raw._replace(anomaly="; ".join(filter(None, (raw.anomaly, left))))
        return classify(raw, limits)

    def _kernel_memory(self, limits: Limits) -> bool:
        """Whether the kernel's memory cap of the sandbox is set to this run's limit."""
        if self._set_memory is None or self._oom_kills is None:
            return False
        return self._set_memory(limits)

    def _cpu_used(self, before: float | None) -> float | None:
        after = self._cpu_seconds() if self._cpu_seconds else None
        return None if before is None or after is None else after - before

    def _await_clean(self) -> str:
        """Read the zygote's second frame; a sandbox it could not empty is killed.

        Returns:
            '' when the sandbox is back to its start state, else what was left (the worker is
            then killed, so the next check gets a fresh sandbox).
        """
        try:
            status, _ = self._recv(time.monotonic() + _CLEAN_GRACE_S)
            if status.get("clean") is True:
                return ""
            left = f"sandbox replaced: {str(status.get('left', status))[:300]}"
        except SandboxProtocolError as exc:
            left = f"sandbox replaced: no clean state after the run ({exc})"
        self.kill()
        return left


def _raw_outcome(
    reply: dict[str, Any], blobs: bytes, oom_kills: Callable[[], int] | None, oom_before: int
) -> RawOutcome:
    out_len, err_len = int(reply["stdout_len"]), int(reply["stderr_len"])
    return RawOutcome(
        exit_code=reply["exit_code"],
        signal=reply["signal"],
        cpu_time_s=float(reply["cpu_time_s"]),
        wall_time_s=float(reply["wall_time_s"]),
        peak_memory_bytes=int(reply["peak_memory_bytes"]),
        stdout=blobs[:out_len],
        stderr=blobs[out_len : out_len + err_len],
        stdout_truncated=bool(reply["stdout_truncated"]),
        stderr_truncated=bool(reply["stderr_truncated"]),
        killed_for=reply["killed_for"],
        oom_killed=(oom_kills() if oom_kills else 0) > oom_before,
        completed=reply["completed"] is True,
        anomaly=reply["anomaly"],
    )


def _overload(
    raw: RawOutcome, reply: dict[str, Any], cpu_used: float | None, limits: Limits
) -> RawOutcome:
    """A run stopped by the wall limit while it waited for a CPU it never got: the host's fault.

    Two kernel counters decide: the sandbox's CPU seconds during the run (its cgroup, which
    counts every process, exited ones too) and the time the run's processes spent runnable but
    not running (``/proc/PID/schedstat``, sampled by pid 1 at the wall limit). A run that got a
    quarter of ``min(wall, CPU limit)`` in CPU seconds, or slept, is the program's TIME_LIMIT;
    one that got less while it waited at least half the wall time for a CPU is an
    infrastructure error to retry. Without a CPU counter the wall limit stays a TIME_LIMIT.
    """
    if cpu_used is None:
        return raw
    wall = raw.wall_time_s
    delay = float(reply.get("delay_s") or 0.0)
    if cpu_used < _STARVED_CPU * min(wall, limits.cpu_time_s) and delay >= _STARVED_WAIT * wall:
        return raw._replace(
            killed_for="overload",
            anomaly=f"host overloaded: {cpu_used:.2f} CPU-s in {wall:.2f} s, "
            f"{delay:.2f} s waiting for a CPU",
        )
    return raw


def _oom_outcome(wall_time_s: float) -> RawOutcome:
    """What a run gets when the OOM killer took the whole sandbox (zygote included)."""
    return RawOutcome(
        exit_code=None,
        signal=int(signal.SIGKILL),
        cpu_time_s=0.0,
        wall_time_s=wall_time_s,
        peak_memory_bytes=0,
        stdout=b"",
        stderr=b"",
        oom_killed=True,
        anomaly="the sandbox was OOM-killed during the run",
    )
