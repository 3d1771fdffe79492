"""The clean template that forks every inline Python run (runs inside the sandbox, stdlib only).

Example (pid 1 of the sandbox starts it; fd 3 is a SOCK_SEQPACKET socket to pid 1)::

    python3 -I -S -c "$(cat sandboxes/_template.py)"

Why it exists: forking a run from pid 1 would hand the run a copy of pid 1's heap, which holds
earlier runs' files, stdin and output. This interpreter is exec'd fresh when the sandbox starts
and never receives any run's data: per run it gets the limits, the argv and *file descriptors*
(stdin memfd, output pipes, completion channel) over SCM_RIGHTS, forks, and the child becomes
``python3 -I -S FILE`` reading its own file from the work directory. Forking it costs a
millisecond where exec'ing a new interpreter costs ten.

What a run could do to it, and why that cannot reach the next run: it is non-dumpable (no
ptrace, no /proc/PID/mem, no pidfd_getfd without CAP_SYS_PTRACE, which no run has); it ignores
every catchable signal, pid 1 sends it SIGCONT before each run, and if it dies pid 1 starts a
new one; before each fork it compares its own rlimits, niceness, scheduler and CPU affinity with
what they were at start (and its I/O priority, scheduler parameters and timer slack:
whatever a syscall taking a *pid* could change) and refuses
("tainted") when they differ, so pid 1 replaces it.

Preloaded modules (``Sandbox.preload``): trusted source the supervisor gives every template of
the backend (certd's function-test harness), as ``NAME SOURCE`` pairs after ``-c``. The
template imports them as ``sys.modules[NAME]`` before it freezes its objects, so each run has
them without loading them; a run changes only its own copy-on-write view of them.

Protocol (one message per line of this list, over fd 3):
  template → pid 1: ``ready``
  pid 1 → template: ``cpu\\0as\\0fsize\\0nofile\\0nproc\\0completion\\0argv...`` + fds
      [stdin, stdout, stderr] (+ [done_w, nonce_r] with completion)
  template → pid 1: ``pid N`` or ``tainted: WHY``
  pid 1 → template: ``go`` (pid 1 has its pidfd; the template may reap the child now)
  template → pid 1: ``exit STATUS UTIME STIME MAXRSS_KIB``
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal.signal without its enum wrapping
import builtins
import ctypes
import fcntl
import gc
import os
import resource
import signal
import socket
import sys
from types import ModuleType

__all__ = ["main"]

_PR_SET_DUMPABLE = 4
_WORKDIR = "/work/run"
_KEEP = (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, signal.SIGCONT)


_LIBC = ctypes.CDLL(None)
_RLIMITS = tuple(getattr(resource, n) for n in dir(resource) if n.startswith("RLIMIT_"))
_IOPRIO_GET = 252 if os.uname().machine == "x86_64" else None
# Imported once here, before any run exists, so a run that needs them does not pay for the
# import (``typing`` is most of a HumanEval prompt's start-up): stdlib modules without I/O,
# randomness or other per-process state, whose import is all a fresh interpreter would do.
_WARM = ("typing", "math", "struct", "builtins")
_BALLAST: list[object] = []  # see _fill_free_blocks
_RESET: list[int] = []  # the signals main() ignores, which a run gets back at SIG_DFL


def _state() -> tuple[object, ...]:
    """Every per-process attribute a syscall taking a pid could change from a run."""
    ioprio = _LIBC.syscall(_IOPRIO_GET, 1, 0) if _IOPRIO_GET is not None else None
    return (
        tuple(resource.getrlimit(r) for r in _RLIMITS),
        os.getpriority(os.PRIO_PROCESS, 0),
        os.sched_getscheduler(0),
        os.sched_getparam(0).sched_priority,
        os.sched_getaffinity(0),
        ioprio,
        _LIBC.prctl(30, 0, 0, 0, 0),  # PR_GET_TIMERSLACK
    )


def _preload(args: list[str]) -> None:
    """Import the supervisor's trusted modules (``NAME SOURCE`` pairs) before any run exists."""
    for name, source in zip(args[::2], args[1::2], strict=True):
        module = ModuleType(name)
        module.__file__ = f"{name}.py"
        sys.modules[name] = module
        exec(compile(source, module.__file__, "exec", dont_inherit=True), module.__dict__)


def _warm_up() -> None:
    """Import ``_WARM``, fill the allocator's free blocks, freeze every object made so far.

    A forked run shares the template's pages until it writes to them; a collection that walks
    the template's objects writes their GC headers and copies their pages into the run. Frozen
    objects are never walked (``gc.freeze``), so a run copies only the pages it really uses.
    """
    for name in _WARM:
        __import__(name)
    gc.collect()
    for _ in range(2):  # the second takes what the first one's parsing freed
        _fill_free_blocks()
    gc.freeze()


def _free_blocks() -> dict[int, int]:
    """{block size: free blocks in partly used pools} of the small-object allocator."""
    fd = os.memfd_create("mallocstats")
    saved = os.dup(2)
    try:
        os.dup2(fd, 2)
        sys._debugmallocstats()  # its table goes to stderr (fd 2)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    data = os.pread(fd, 1 << 20, 0)
    os.close(fd)
    free = {}
    for line in data.split(b"\n"):
        f = line.split()  # class, size, pools, blocks in use, free blocks
        if len(f) == 5 and all(x.isdigit() for x in f):
            free[int(f[1])] = int(f[4])
    return free


def _fill_free_blocks() -> None:
    """Take every free block of the template's partly used pools, for the template's life.

    Free blocks are scattered over pools of pages a run shares with the template: a run's
    allocations would land on them and copy a page (a fault) for every few objects. Taken
    here, a run's objects go to fresh pools instead, packed into few pages (HumanEval's harness
    run: ~1,180 → ~1,000 page faults). Plain bytes, floats and objects, made of nothing.
    """
    empty = sys.getsizeof(b"")
    for size, n in _free_blocks().items():
        if size == 16:
            _BALLAST.extend([object() for _ in range(n)])
        elif size < empty + 1:
            _BALLAST.extend([i + 0.5 for i in range(n)])  # a float: 24 bytes, class 32
        else:
            _BALLAST.extend([bytes(size - empty) for _ in range(n)])


def _child(fields: list[str], fds: list[int]) -> None:
    """In the forked child: stdio, limits, signals, then the program. Never returns."""
    try:
        os.setsid()
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 256) for fd in fds]
        for i, fd in enumerate(high):
            os.dup2(fd, i)  # 0-2 stdio; with completion 3 = done_w, 4 = nonce_r
        os.closerange(len(fds), 65536)
        cpu, mem, fsize, nofile, nproc = (int(v) for v in fields[:5])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        if mem:  # 0: the sandbox's kernel memory cap enforces the run's memory instead
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if nproc:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        for sig in _RESET:  # _signal: signal.signal's enum wrapping costs a run 0.1 ms
            _signal.signal(sig, 0)  # SIG_DFL
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as the interpreter sets it up
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        os.chdir(_WORKDIR)
        argv = fields[6:]
        sys.argv = argv[1:]
        sys.path.insert(0, _WORKDIR)
        with open(argv[1], "rb") as f:
            source = f.read()
    except BaseException as exc:  # noqa: BLE001 - nothing may escape into the template's loop
        os.write(2, f"sandbox: cannot start the program: {exc}\n".encode())
        os._exit(127)
    _execute(argv[1], source)


def _execute(path: str, source: bytes, os: ModuleType = os, sys: ModuleType = sys) -> None:
    """Run ``source`` as ``__main__`` with the semantics of ``python3 -I -S FILE``.

    The run gets a new ``__main__`` module; the template's stays as it is (emptying it would
    free its objects, writing to and copying the pages they share with the template).
    """
    main_module = ModuleType("__main__")
    g = main_module.__dict__
    g.update(__file__=path, __cached__=None, __builtins__=builtins)
    sys.modules["__main__"] = main_module
    code = 0
    try:
        exec(compile(source, path, "exec", dont_inherit=True), g)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code & 0xFF
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - the interpreter prints any uncaught error
        t, v, tb = sys.exc_info()
        tb = tb.tb_next if tb is not None else None
        try:
            sys.excepthook(t, v.with_traceback(tb), tb)
        except BaseException:  # noqa: BLE001 - as the interpreter: nothing more to do
            pass
        code = 1
    try:
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        code = code or 120
    os._exit(code)


def main() -> None:
    """Fork one run per request from pid 1 until the socket closes."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")  # inherited by every run: the OOM killer takes runs first
    except OSError:
        pass
    _LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    for sig in signal.valid_signals():
        if sig not in _KEEP:
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (OSError, ValueError):
                continue
            _RESET.append(int(sig))
    sock = socket.socket(fileno=3)
    _preload(sys.argv[1:])
    _warm_up()
    baseline = _state()
    sock.send(b"ready")
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, 5)
        if not msg:
            return
        if _state() != baseline:
            for fd in fds:
                os.close(fd)
            sock.send(b"tainted: its limits, priority or affinity were changed")
            return
        fields = msg.decode().split("\0")
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(fields, fds)
        for fd in fds:
            os.close(fd)
        sock.send(f"pid {pid}".encode())
        sock.recv(16)  # "go": pid 1 holds a pidfd of the run now
        _, status, usage = os.wait4(pid, 0)
        sock.send(f"exit {status} {usage.ru_utime} {usage.ru_stime} {usage.ru_maxrss}".encode())


if __name__ == "__main__":
    main()
