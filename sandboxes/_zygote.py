"""The trusted worker that runs as pid 1 inside every sandbox (bwrap namespace or container).

Example (the supervisor runs it; it needs to be pid 1 of a fresh PID namespace)::

    python3 -I -S -c "$(cat sandboxes/_zygote.py)"   # inside bwrap --as-pid-1 / a container

It speaks length-prefixed frames on fds 0/1 with the supervisor outside the sandbox. For every
run it makes a fresh work directory, forks a fresh process that gets new stdio pipes, a clean
environment and kernel rlimits, then kills every other process of the namespace and wipes every
writable place (/work, /tmp, /dev/shm) before the next run. It never runs untrusted code in its
own process, keeps itself non-dumpable (no /proc/1/mem, /proc/1/fd for the runs), and as pid 1
of the namespace it cannot be killed from inside it. Standard library only: it runs under the
sandbox's system python3, not the caller's virtual environment.
"""

from __future__ import annotations

import builtins
import ctypes
import json
import os
import resource
import select
import signal
import struct
import sys
import time
import traceback
from typing import Any

__all__ = ["main"]

_WORKDIR = "/work/run"
_WIPE = ("/work", "/tmp", "/dev/shm")
_LEN = struct.Struct(">I")
_MAX_FRAME = 1 << 30
_DRAIN_S = 0.2  # after the program exits, how long leftovers may hold its pipes open
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
_PR_SET_DUMPABLE = 4


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


def _wipe(path: str) -> None:
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)
                _wipe(entry.path)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def _other_pids() -> list[int]:
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]


def _kill_all() -> None:
    try:
        os.kill(-1, signal.SIGKILL)  # as pid 1: every process of the namespace but itself
    except ProcessLookupError:
        pass


def _reap_all() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _child(req: dict[str, Any], fds: dict[str, int]) -> None:
    """In the forked process: stdio, limits, environment, then the program. Never returns."""
    try:
        os.setsid()
        os.chdir(_WORKDIR)
        os.dup2(fds["stdin"], 0)
        os.dup2(fds["out"], 1)
        os.dup2(fds["err"], 2)
        keep = 3
        if "done_w" in fds:
            os.dup2(fds["done_w"], 3)
            os.dup2(fds["nonce_r"], 4)
            keep = 5
        os.closerange(keep, 65536)
        lim = req["limits"]
        cpu = max(1, int(lim["cpu_time_s"] + 0.999))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (lim["memory_bytes"], lim["memory_bytes"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim["file_size_bytes"],) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lim["open_files"],) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")  # the kernel's OOM killer takes a run before the worker
        except OSError:
            pass  # not permitted while non-dumpable on some kernels
        if req.get("nproc"):
            resource.setrlimit(resource.RLIMIT_NPROC, (req["nproc"],) * 2)
        env = dict(_ENV, HOME=_WORKDIR)
        argv = req["argv"]
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        if req.get("inline"):
            _inline(argv, env)
        os.execvpe(argv[0], argv, env)
    except BaseException as exc:  # noqa: BLE001 - nothing may escape into the zygote's loop
        try:
            os.write(2, f"sandbox: cannot start {req.get('argv')!r}: {exc}\n".encode())
        finally:
            os._exit(127)


def _inline(argv: list[str], env: dict[str, str]) -> None:
    """Run ``python3 FILE`` in this freshly forked interpreter. Never returns."""
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as the interpreter sets it up
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = list(argv[1:])
    sys.path.insert(0, _WORKDIR)
    with open(argv[1], "rb") as f:
        source = f.read()
    code = 0
    try:
        compiled = compile(source, argv[1], "exec", dont_inherit=True)
        exec(compiled, {"__name__": "__main__", "__file__": argv[1], "__builtins__": builtins})
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code & 0xFF
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - the interpreter prints any uncaught error
        traceback.print_exc()
        code = 1
    try:
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        code = code or 120
    os._exit(code)


def _run(req: dict[str, Any], blobs: memoryview) -> None:
    lim = req["limits"]
    cap = int(lim["output_bytes"])
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
    stdin_fd = os.memfd_create("stdin", 0)
    _write_all(stdin_fd, blobs[pos : pos + req["stdin_len"]])
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    fds = {"stdin": stdin_fd, "out": out_w, "err": err_w}
    done_r = nonce_w = -1
    if req.get("completion"):
        done_r, fds["done_w"] = os.pipe()
        fds["nonce_r"], nonce_w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(req, fds)
    for key in ("stdin", "out", "err", "done_w", "nonce_r"):
        if key in fds:
            os.close(fds[key])
    nonce = b""
    if nonce_w >= 0:
        nonce = os.urandom(24).hex().encode()  # made after the fork: never in the child's memory
        os.write(nonce_w, nonce)
        os.close(nonce_w)
    pidfd = os.pidfd_open(pid)
    bufs = {out_r: bytearray(), err_r: bytearray()}
    truncated = {out_r: False, err_r: False}
    done = bytearray()
    open_fds = [out_r, err_r] + ([done_r] if done_r >= 0 else [])
    deadline = start + float(lim["wall_time_s"])
    killed_for = None
    exited_at = None
    while True:
        now = time.monotonic()
        if exited_at is not None and (not open_fds or now >= exited_at + _DRAIN_S):
            break
        if now >= deadline and exited_at is None:
            killed_for = "wall"
            _kill_all()
            deadline = float("inf")
        watch = open_fds + ([pidfd] if exited_at is None else [])
        limit_at = exited_at + _DRAIN_S if exited_at is not None else deadline
        ready, _, _ = select.select(watch, [], [], max(0.0, min(limit_at - now, 1.0)))
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
                    _kill_all()
    wall = time.monotonic() - start
    leftovers = _other_pids()
    _kill_all()
    _, status, usage = os.wait4(pid, 0)
    _reap_all()
    for fd in [out_r, err_r, pidfd] + ([done_r] if done_r >= 0 else []):
        os.close(fd)
    for path in _WIPE:
        _wipe(path)
    anomaly = None
    others = [p for p in leftovers if p != pid]
    if others:
        anomaly = f"{len(others)} leftover process(es) killed"
    header = {
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "cpu_time_s": usage.ru_utime + usage.ru_stime,
        "wall_time_s": wall,
        "peak_memory_bytes": usage.ru_maxrss * 1024,
        "stdout_len": len(bufs[out_r]),
        "stderr_len": len(bufs[err_r]),
        "stdout_truncated": truncated[out_r],
        "stderr_truncated": truncated[err_r],
        "killed_for": killed_for,
        "completed": bool(nonce) and bytes(done) == nonce,
        "anomaly": anomaly,
    }
    _send(header, bufs[out_r], bufs[err_r])
    for buf in bufs.values():
        buf[:] = bytes(len(buf))


def main() -> None:
    """Serve runs until the supervisor closes fd 0."""
    if os.getpid() != 1:
        _send({"error": "the sandbox worker must be pid 1 of its own PID namespace"})
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    for path in _WIPE:
        _wipe(path)
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
                _run(req, view[4 + head_len :])
        finally:
            frame[:] = bytes(len(frame))  # nothing of this run lingers for the next one


if __name__ == "__main__":
    main()
