"""The trusted worker that runs as pid 1 inside every sandbox (bwrap namespace or container).

Example (the supervisor runs it; it needs to be pid 1 of a fresh PID namespace)::

    python3 -I -S -c "$(cat sandboxes/_zygote.py)"   # inside bwrap --as-pid-1 / a container

It speaks length-prefixed frames on fds 0/1 with the supervisor outside the sandbox. Per run it
answers two frames: the result, then whether the sandbox is back to its empty state.

Every run gets an address space that never held another run's data: a native program is
exec'd from a child forked a moment before (only trusted code runs between fork and exec); an
inline Python run is forked from the *template* (``_template.py``), an interpreter exec'd when
the sandbox starts that receives limits, argv and file descriptors, never files, stdin or
output. pid 1 holds inputs and outputs in its heap, so no untrusted code ever runs in a process
forked from it without exec.

After a run pid 1 kills every other process of the namespace (the template excepted), then
returns the sandbox to its start state and checks it: /work, /tmp, /dev/shm emptied without
recursion and verified empty, every SysV IPC object and POSIX message queue removed and verified
gone, no process left, its own per-process attributes unchanged (``self_state``). Anything it
cannot verify makes the second frame say "dirty", and the supervisor replaces the sandbox.
pid 1 is non-dumpable (no /proc/1/mem for runs) and, as pid 1 of the namespace, cannot be
killed from inside it. Standard library only: it runs under the sandbox's system python3.
"""

from __future__ import annotations

import ctypes
import errno  # noqa: F401 - used by the inlined _cleanup.py (open_pidfd)
import fcntl
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox these come from the inlined _cleanup.py (see below)
    from sandboxes._cleanup import (
        cleanup,
        collect,
        exited,
        kill_except,
        open_pidfd,
        other_pids,
        run_delay,
        self_state,
    )

__all__ = ["main"]

_WORKDIR = "/work/run"
_LEN = struct.Struct(">I")
_MAX_FRAME = 1 << 30
_DRAIN_S = 0.2  # after the program exits, how long leftovers may hold its pipes open
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
_PR_SET_DUMPABLE = 4
_LIBC = ctypes.CDLL(None, use_errno=True)

_TEMPLATE_SOURCE = ""  # sandboxes/_template.py, put here by worker.zygote_source()
# name, source, name, source, ...: the trusted modules the template imports when it starts
# (Sandbox.preload), put here by worker.zygote_source() and passed on the template's argv.
_PRELOAD: list[str] = []
# @cleanup: worker.zygote_source() inlines the body of sandboxes/_cleanup.py here


def _read_exact(fd: int, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if k == 0:
            raise EOFError
        got += k
    return buf


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        k = os.write(fd, view)
        view = view[k:]


def _send(header: dict[str, Any], *blobs: bytes | bytearray) -> None:
    head = json.dumps(header, separators=(",", ":")).encode()
    body = _LEN.pack(len(head)) + head
    total = len(body) + sum(len(b) for b in blobs)
    _write_all(1, _LEN.pack(total) + body)
    for blob in blobs:
        _write_all(1, blob)


def _arrange(fds: list[int]) -> None:
    """In a fresh child: make ``fds`` its fds 0..n-1 (no clobbering) and close every other."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 256) for fd in fds]
    for i, fd in enumerate(high):
        os.dup2(fd, i)
    os.closerange(len(fds), 65536)


def _set_limits(lim: dict[str, Any], nproc: int | None) -> None:
    cpu = max(1, int(lim["cpu_time_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if lim.get("as_bytes", lim["memory_bytes"]):  # 0: the kernel's cgroup cap enforces it
        resource.setrlimit(resource.RLIMIT_AS, (lim["as_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (lim["file_size_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lim["open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if nproc:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _exec_child(req: dict[str, Any], fds: list[int]) -> None:
    """In the forked child of a native run: stdio, limits, environment, execve. Never returns.

    Only this trusted code runs between the fork and the execve, which replaces the address
    space (and with it the copy of pid 1's heap) before the program's first instruction.
    """
    try:
        os.setsid()
        os.chdir(_WORKDIR)
        _arrange(fds)
        _set_limits(req["limits"], req.get("nproc"))
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")  # the kernel's OOM killer takes a run before the worker
        except OSError:
            pass  # not permitted while non-dumpable on some kernels
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        argv = req["argv"]
        os.execvpe(argv[0], argv, dict(_ENV, HOME=_WORKDIR))
    except BaseException as exc:  # noqa: BLE001 - nothing may escape into the zygote's loop
        try:
            os.write(2, f"sandbox: cannot start {req.get('argv')!r}: {exc}\n".encode())
        finally:
            os._exit(127)


class _TemplateGoneError(Exception):
    """The template died, was tampered with or did not answer; it is replaced."""


class _Template:
    """The clean interpreter that forks inline Python runs (see ``_template.py``)."""

    def __init__(self) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        devnull = os.open("/dev/null", os.O_RDWR)
        self.pid = os.fork()
        if self.pid == 0:
            try:
                os.setsid()
                os.chdir("/")
                _arrange([devnull, devnull, devnull, theirs.fileno()])
                exe = sys.executable or "/usr/bin/python3"
                argv = [exe, "-I", "-S", "-c", _TEMPLATE_SOURCE, *_PRELOAD]
                os.execve(exe, argv, dict(_ENV, HOME=_WORKDIR))
            finally:
                os._exit(127)
        os.close(devnull)
        theirs.close()
        self.sock.settimeout(30.0)
        if self._recv() != b"ready":
            self.kill()
            raise _TemplateGoneError("the template did not start")

    def _recv(self) -> bytes:
        try:
            return self.sock.recv(256)
        except OSError:
            return b""

    def fork_run(self, msg: bytes, fds: list[int]) -> int:
        """Have the template fork a run; returns its pid once pid 1 has a pidfd of it."""
        try:
            os.kill(self.pid, signal.SIGCONT)  # a run may have stopped it
            self.sock.settimeout(10.0)
            socket.send_fds(self.sock, [msg], fds)
        except OSError as exc:
            raise _TemplateGoneError(str(exc)) from exc
        reply = self._recv()
        if not reply.startswith(b"pid "):
            raise _TemplateGoneError(reply.decode(errors="replace") or "no answer")
        return int(reply[4:])

    def go(self) -> None:
        try:
            self.sock.send(b"go")
        except OSError:
            pass  # its report will be missing; the run's status comes from pid 1's reaping

    def report(self) -> tuple[int, float, int] | None:
        """The run's wait status, CPU seconds and peak RSS (KiB), as the template reaped it."""
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            return None
        self.sock.settimeout(5.0)
        parts = self._recv().split()
        if len(parts) != 5 or parts[0] != b"exit":
            return None
        return int(parts[1]), float(parts[2]) + float(parts[3]), int(parts[4])

    def kill(self) -> None:
        """Kill and reap the template."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.sock.close()
        collect(self.pid)


def _write_files(req: dict[str, Any], blobs: memoryview, stdin_fd: int) -> None:
    os.mkdir(_WORKDIR, 0o755)
    pos = 0
    for name, size, executable in req["files"]:
        fd = os.open(
            f"{_WORKDIR}/{name}",
            os.O_WRONLY | os.O_CREAT | os.O_EXCL,
            0o755 if executable else 0o644,
        )
        _write_all(fd, blobs[pos : pos + size])
        os.close(fd)
        pos += size
    _write_all(stdin_fd, blobs[pos : pos + req["stdin_len"]])
    os.lseek(stdin_fd, 0, os.SEEK_SET)


def _start(req: dict[str, Any], blobs: memoryview, box: dict[str, Any]) -> dict[str, Any]:
    """Start the run; returns its pid, pidfd and pid 1's ends of its pipes."""
    lim = req["limits"]
    completion = bool(req.get("completion"))
    stdin_fd = os.memfd_create("stdin", 0)
    _write_files(req, blobs, stdin_fd)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    child = [stdin_fd, out_w, err_w]
    done_r = -1
    nonce = b""
    if completion:
        done_r, done_w = os.pipe()
        nonce_r, nonce_w = os.pipe()
        child += [done_w, nonce_r]
        # The nonce waits in the pipe, written before the run starts (so no race with a run
        # that closes fd 4 early): a run learns it only by reading fd 4. It is made in pid 1,
        # whose memory no untrusted code ever sees (native runs exec; inline runs fork from
        # the template).
        nonce = os.urandom(24).hex().encode()
        os.write(nonce_w, nonce)
        os.close(nonce_w)
    start = time.monotonic()
    if req.get("inline"):
        cpu = max(1, int(lim["cpu_time_s"] + 0.999))
        fields = [cpu, lim.get("as_bytes", lim["memory_bytes"])]
        fields += [lim["file_size_bytes"], lim["open_files"]]
        fields += [req.get("nproc") or 0, int(completion)]
        msg = "\0".join([str(v) for v in fields] + list(req["argv"])).encode()
        pid = _template_fork(box, msg, child)
    else:
        pid = os.fork()
        if pid == 0:
            _exec_child(req, child)
    for fd in child:
        os.close(fd)
    pidfd = open_pidfd(pid)
    if req.get("inline"):
        box["template"].go()
    run: dict[str, Any] = {"pid": pid, "pidfd": pidfd, "out": out_r, "err": err_r}
    run.update(done=done_r, nonce=nonce, start=start)
    return run


def _template_fork(box: dict[str, Any], msg: bytes, fds: list[int]) -> int:
    """Fork an inline run from the template, replacing a template that is gone or tainted."""
    for attempt in range(2):
        if box.get("template") is None:
            box["template"] = _Template()
        try:
            pid: int = box["template"].fork_run(msg, fds)
            return pid
        except _TemplateGoneError:
            box.pop("template").kill()
            if attempt:
                raise
    raise AssertionError("unreachable")


def _wall_kill(box: dict[str, Any]) -> float:
    """Kill the run at its wall limit; how long its processes had waited for a CPU."""
    delay: float = run_delay(box["template"].pid if box.get("template") else None)
    _kill_run(box)
    return delay


def _kill_run(box: dict[str, Any]) -> None:
    template = box.get("template")
    kill_except(template.pid if template is not None else None)


def _supervise(run: dict[str, Any], lim: dict[str, Any], box: dict[str, Any]) -> dict[str, Any]:
    """Collect the run's output until it exits; enforce the wall and output limits."""
    cap = int(lim["output_bytes"])
    out_r, err_r, done_r, pidfd = run["out"], run["err"], run["done"], run["pidfd"]
    nonce = run["nonce"]
    bufs = {out_r: bytearray(), err_r: bytearray()}
    truncated = {out_r: False, err_r: False}
    done = bytearray()
    open_fds = [out_r, err_r] + ([done_r] if done_r >= 0 else [])
    deadline = run["start"] + float(lim["wall_time_s"])
    killed_for = None
    delay = 0.0
    exited_at = None
    try:
        while True:
            now = time.monotonic()
            if exited_at is not None and (not open_fds or now >= exited_at + _DRAIN_S):
                break
            if now >= deadline and exited_at is None:
                killed_for, delay = "wall", _wall_kill(box)
                deadline = float("inf")
            watch = open_fds + ([pidfd] if exited_at is None and pidfd >= 0 else [])
            limit_at = exited_at + _DRAIN_S if exited_at is not None else deadline
            tick = 1.0 if pidfd >= 0 else 0.01  # without a pidfd, poll the run's state
            ready, _, _ = select.select(watch, [], [], max(0.0, min(limit_at - now, tick)))
            if pidfd < 0 and exited_at is None and exited(run["pid"]):
                exited_at = time.monotonic()
            for fd in ready:
                if fd == pidfd:
                    exited_at = time.monotonic()
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    open_fds.remove(fd)
                    continue
                if fd == done_r:
                    if len(done) < 4096:
                        done += chunk
                    continue
                room = cap - len(bufs[fd])
                bufs[fd] += chunk[: max(room, 0)]
                if len(chunk) > room:
                    truncated[fd] = True
                    if killed_for is None and exited_at is None:
                        killed_for = "output"
                        _kill_run(box)
    except (OSError, MemoryError):
        # Only a run can make pid 1 fail here (e.g. prlimit on pid 1 where seccomp allows it).
        _kill_run(box)
        killed_for = "interference"
    return {
        "wall": time.monotonic() - run["start"],
        "out": bufs[out_r],
        "err": bufs[err_r],
        "out_trunc": truncated[out_r],
        "err_trunc": truncated[err_r],
        "killed_for": killed_for,
        "completed": bool(nonce) and bytes(done) == nonce,
        "delay": delay,
    }


def _run(req: dict[str, Any], blobs: memoryview, box: dict[str, Any]) -> None:
    run = _start(req, blobs, box)
    seen = _supervise(run, req["limits"], box)
    pid = run["pid"]
    template = box.get("template")
    keep = template.pid if template is not None else None
    try:
        leftovers = [p for p in other_pids() if p not in (pid, keep)]
    except OSError:
        leftovers = []  # the cleanup cannot list /proc either: the sandbox is replaced
    kill_except(keep)
    outcome: tuple[int, float, int] | None = None
    if req.get("inline") and template is not None:
        outcome = template.report()
        if outcome is None:  # the run killed, stopped or tampered with the template
            box.pop("template").kill()
            seen["killed_for"] = seen["killed_for"] or "interference"
    if outcome is None:
        reaped = collect(pid)
        if reaped is not None:
            status, usage = reaped
            outcome = status, usage.ru_utime + usage.ru_stime, usage.ru_maxrss
    status, cpu, maxrss_kib = outcome if outcome is not None else (int(signal.SIGKILL), 0.0, 0)
    for fd in (run["out"], run["err"], run["pidfd"], run["done"]):
        if fd >= 0:
            os.close(fd)
    header = {
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "cpu_time_s": cpu,
        "wall_time_s": seen["wall"],
        "peak_memory_bytes": maxrss_kib * 1024,
        "stdout_len": len(seen["out"]),
        "stderr_len": len(seen["err"]),
        "stdout_truncated": seen["out_trunc"],
        "stderr_truncated": seen["err_trunc"],
        "killed_for": seen["killed_for"],
        "completed": seen["completed"],
        "anomaly": f"{len(leftovers)} leftover process(es) killed" if leftovers else None,
        "delay_s": seen["delay"],
    }
    _send(header, seen["out"], seen["err"])
    for buf in (seen["out"], seen["err"]):
        buf[:] = bytes(len(buf))


def _connect_channel() -> None:
    """With ``--channel=PATH`` (Docker): frames go over that unix socket, as fds 0 and 1.

    The supervisor accepts one connection, from this pid only, then removes the path; the
    template and the runs never see fds 0 and 1 (``_arrange``), as with pipes.
    """
    for arg in sys.argv[1:]:
        if arg.startswith("--channel="):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(arg.partition("=")[2])
                os.dup2(sock.fileno(), 0)
                os.dup2(sock.fileno(), 1)


def main() -> None:
    """Serve runs until the supervisor closes fd 0."""
    _connect_channel()
    if os.getpid() != 1:
        _send({"error": "the sandbox worker must be pid 1 of its own PID namespace"})
        return
    _LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    baseline = self_state()
    ipc = "--fresh-kernel" not in sys.argv[1:]  # gVisor: IPC state dies with the one-run kernel
    left = cleanup(baseline, None, ipc)
    if left:
        _send({"error": "the sandbox is not empty at start: " + "; ".join(left)})
        return
    box: dict[str, Any] = {"template": _Template()}
    _send({"ready": True, "python": list(sys.version_info[:3])})
    while True:
        try:
            (total,) = _LEN.unpack(_read_exact(0, 4))
            if total > _MAX_FRAME:
                raise EOFError
            frame = _read_exact(0, total)
        except EOFError:
            return
        (head_len,) = _LEN.unpack_from(frame, 0)
        req = json.loads(bytes(frame[4 : 4 + head_len]))
        try:
            with memoryview(frame) as view:
                _run(req, view[4 + head_len :], box)
        finally:
            frame[:] = bytes(len(frame))  # nothing of this run lingers for the next one
        template = box.get("template")
        left = cleanup(baseline, template.pid if template is not None else None, ipc)
        _send({"clean": not left, "left": "; ".join(left)})
        if left:
            return


if __name__ == "__main__":
    main()
