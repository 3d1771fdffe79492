"""The function-test harness: the tests and the solution in two processes, values crossing as data.

Example (judge.function_program() writes it, after ``_codec.py``, as ``main.py`` of a run)::

    python3 main.py   # with prompt.py, tests.py, solution.py in the work directory

The run's process (the *test process*) forks the *solution process* before it reads the tests,
so the solution's copy of its memory holds no test, no expected value and no nonce. The child
closes every fd but stdio and its two pipes (the completion channel, fds 3 and 4, among them)
and waits. The test process then makes itself non-dumpable (no ``/proc/PID/mem``, ``fd/``,
``ptrace`` or ``pidfd_getfd`` for a process of the same uid; seccomp denies ptrace as well),
drops the work directory from ``sys.path``, reads ``tests.py`` and unlinks it, runs the tests
in its own namespace, and only then lets the solution process load ``solution.py``. The prompt
(trusted task text, and the start of the solution's source anyway: helpers such as HumanEval's
``poly``) runs in that namespace before the fork, so the modules it imports load once.

``candidate`` in the tests is a proxy: each call sends its arguments (encoded by the codec) to
the solution process, which calls the entry function and sends back the encoded result or the
exception's type name, builtin base class and message. The test process decodes plain values
only; an exception crosses as an instance of its builtin base class (renamed after the
solution's class), so ``except ValueError`` in a test still works. The solution's contract
broken (a result outside the codec, a malformed reply, a ``SystemExit``, its process gone) is a
*fault*: recorded, raised as a ``BaseException`` the test cannot mistake for a failure it
expects, and reported as ``SolutionError: …`` with exit status 1 whatever the test caught (0,
still without the nonce, when the solution exited 0 or raised ``SystemExit(0)``: the judge's
"exited before the tests completed"). A
test that passes something other than a value (a callback, an object) is refused: exit status 3
and ``TaskBoundaryError: …``. Only the test process, after ``check`` returned and with no fault
recorded, reads the nonce from fd 4 and writes it to fd 3.
"""

from __future__ import annotations

import builtins
import ctypes
import gc
import os
import signal
import struct
import sys
from typing import Any

from ._codec import MAX_FRAME_BYTES, CodecError, decode, encode  # inlined: judge.py drops this

__all__ = ["SolutionFault", "TaskBoundaryError", "main"]
_FRAME = struct.Struct(">I")
_MESSAGE_CHARS = 2000
_EXIT_TASK = 3
_PR_SET_DUMPABLE = 4
# Looked up once: where the template preloads the harness, no run pays for dlopen and dlsym.
_PRCTL = ctypes.CDLL(None).prctl


class SolutionFault(BaseException):
    """The solution broke the boundary's contract: the run is the solution's RUNTIME_ERROR."""


class TaskBoundaryError(BaseException):
    """The test needs more than values across the boundary: the task cannot run under it."""


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks: list[bytes] = []
    got = 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int) -> bytes | None:
    """One frame, or None at end of file (a frame over the limit counts as malformed)."""
    head = _read_exact(fd, 4)
    if head is None:
        return None
    (n,) = _FRAME.unpack(head)
    if n > MAX_FRAME_BYTES + 1:
        raise CodecError(f"a frame larger than {MAX_FRAME_BYTES} bytes")
    return _read_exact(fd, n)


def _write_frame(fd: int, data: bytes) -> None:
    view = memoryview(_FRAME.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _describe(exc: BaseException) -> bytes:
    """An exception as data: its type's name, its nearest builtin base's name, its message."""
    base = next(
        (c for c in type(exc).__mro__ if getattr(builtins, c.__name__, None) is c), Exception
    )
    try:
        message = str(exc)[:_MESSAGE_CHARS]
    except BaseException:  # noqa: BLE001 - the solution's __str__ may raise anything
        message = ""
    return encode((type(exc).__name__, base.__name__, message))


def _solution(entry: str, req: int, resp: int) -> None:
    """In the solution process: close other fds, wait for go, load, answer calls. Never returns."""
    try:
        low = 3
        for fd in sorted((req, resp)):
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 1 << 16)
        if _read_frame(req) != b"G":
            os._exit(0)
        g: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        try:
            with open("solution.py", "rb") as f:
                source = f.read()
            exec(compile(source, "solution.py", "exec", dont_inherit=True), g)
            if entry not in g:
                raise NameError(f"name {entry!r} is not defined")
        except BaseException as exc:  # noqa: BLE001 - it crosses as data
            _write_frame(resp, b"E" + _describe(exc))
            os._exit(0)
        _write_frame(resp, b"L")
        _serve(g[entry], req, resp)
    except BaseException:  # noqa: BLE001 - never back into the template's code
        os._exit(1)
    os._exit(0)


def _serve(fn: Any, req: int, resp: int) -> None:
    while True:
        frame = _read_frame(req)
        if frame is None or frame[:1] != b"C":
            return
        args, kwargs = decode(frame[1:])
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - it crosses as data
            reply = b"E" + _describe(exc)
        else:
            try:
                reply = b"R" + encode(result)
            except CodecError as exc:
                reply = b"X" + encode(str(exc))
        try:
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001 - the solution's stdout is its own affair
            pass
        _write_frame(resp, reply)


class _Proxy:
    """The test process's end: calls cross as frames; faults are recorded, never forgotten."""

    def __init__(self, pid: int, req: int, resp: int) -> None:
        self.pid, self.req, self.resp = pid, req, resp
        self.fault = ""
        self.task_error = ""
        self.signal = 0
        self.exited = False
        self.status = 1  # the run's exit status for a fault; 0 when the solution exited 0

    def fail(self, message: str) -> SolutionFault:
        self.fault = self.fault or message[:_MESSAGE_CHARS]
        return SolutionFault(self.fault)

    def gone(self) -> SolutionFault:
        """The solution process closed its end: reap it and say how it ended."""
        if not self.exited:
            _, status = os.waitpid(self.pid, 0)
            self.exited = True
            if os.WIFSIGNALED(status):
                self.signal = os.WTERMSIG(status)
                return self.fail(f"its process was killed by {signal.Signals(self.signal).name}")
            code = os.waitstatus_to_exitcode(status)
            self.status = 0 if code == 0 and not self.fault else self.status
            return self.fail(f"its process exited with status {code}")
        return self.fail("its process is gone")

    def exchange(self, frame: bytes) -> bytes:
        if self.fault:
            raise SolutionFault(self.fault)
        try:
            _write_frame(self.req, frame)
            reply = _read_frame(self.resp)
        except OSError:
            reply = None
        except CodecError as exc:
            raise self.fail(f"sent a malformed reply ({exc})") from None
        if reply is None:
            raise self.gone()
        if not reply:
            raise self.fail("sent an empty reply")
        return reply

    def start(self) -> None:
        reply = self.exchange(b"G")
        if reply[:1] == b"E":
            exc = self.exception(reply[1:])
            raise self.fail(f"failed to load: {type(exc).__name__}: {exc}")
        if reply != b"L":
            raise self.fail("sent a malformed reply")

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.task_error:
            raise TaskBoundaryError(self.task_error)
        try:
            payload = encode((args, kwargs))
        except CodecError as exc:
            self.task_error = f"the test passed {exc} to the solution; only values cross"
            raise TaskBoundaryError(self.task_error) from None
        reply = self.exchange(b"C" + payload)
        tag, body = reply[:1], reply[1:]
        try:
            value = decode(body)
        except CodecError as exc:
            raise self.fail(f"sent a malformed reply ({exc})") from None
        if tag == b"R":
            return value
        if tag == b"E":
            raise self.exception(body)
        if tag == b"X" and isinstance(value, str):
            raise self.fail(f"returned {value}")
        raise self.fail("sent a malformed reply")

    def exception(self, body: bytes) -> Exception:
        try:
            name, base, message = decode(body)
        except (CodecError, TypeError, ValueError):
            raise self.fail("sent a malformed exception") from None
        if not all(isinstance(s, str) for s in (name, base, message)):
            raise self.fail("sent a malformed exception")
        cls = getattr(builtins, base, None)
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            if cls is SystemExit and message in ("", "0", "None") and not self.fault:
                self.status = 0  # sys.exit(0): it ended the run before the tests completed
            raise self.fail(f"raised {name[:100]}: {message}")
        if issubclass(cls, StopIteration | StopAsyncIteration):
            # It would end the test's own iteration (all(map(candidate, xs)) would pass), so
            # it crosses as a RuntimeError, as PEP 479 converts it out of a generator.
            return RuntimeError(f"the solution raised {name[:100]}: {message}")
        if name != cls.__name__ and name.isidentifier():
            cls = type(name, (cls,), {"__module__": "solution"})
        try:
            return cls(message)  # type: ignore[no-any-return]
        except Exception:  # noqa: BLE001 - a builtin that wants other arguments
            return RuntimeError(f"{name}: {message}")

    def candidate(self, entry: str) -> Any:
        def candidate(*args: Any, **kwargs: Any) -> Any:
            return self.call(args, kwargs)

        candidate.__name__ = candidate.__qualname__ = entry
        return candidate

    def stop(self) -> None:
        if not self.exited:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.exited = True
        for fd in (self.req, self.resp):
            try:
                os.close(fd)
            except OSError:
                pass


def _exec_prompt(source: bytes, ns: dict[str, Any]) -> None:
    """Run the task's prompt (trusted) for its helpers; one that ends in an open ``def`` (the
    response supplies the body) gets ``pass`` as that body."""
    for text in (source, source + b"\n    pass\n"):
        try:
            code = compile(text, "prompt.py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            continue
        try:
            exec(code, ns)
        except Exception:  # noqa: BLE001 - the tests then run without its helpers
            pass
        return


def _run_tests(entry: str, proxy: _Proxy, ns: dict[str, Any]) -> None:
    workdir = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", workdir)]
    with open("tests.py", "rb") as f:
        tests = f.read()
    os.unlink("tests.py")
    exec(compile(tests, "tests.py", "exec", dont_inherit=True), ns)
    if not callable(ns.get("check")):
        proxy.task_error = "the test defines no check(candidate)"
        raise TaskBoundaryError(proxy.task_error)
    candidate = proxy.candidate(entry)
    ns[entry] = candidate
    proxy.start()
    try:
        ns["check"](candidate)
    except NameError as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is None or tb.tb_frame.f_code.co_filename not in ("tests.py", "prompt.py"):
            raise  # the solution's NameError, crossed as data
        proxy.task_error = (
            f"the test uses {exc.name!r}, which neither it nor the prompt defines; "
            "the solution's globals never cross, only values"
        )
        raise TaskBoundaryError(proxy.task_error) from None


def _finish(proxy: _Proxy) -> None:
    """After the tests: a recorded fault or task error decides, whatever the test caught."""
    proxy.stop()
    if proxy.fault:
        sys.stdout.flush()
        sys.stderr.write(f"SolutionError: {proxy.fault}\n")
        sys.stderr.flush()
        if proxy.signal in (signal.SIGXCPU, signal.SIGXFSZ, signal.SIGKILL):
            signal.signal(proxy.signal, signal.SIG_DFL)
            os.kill(os.getpid(), proxy.signal)  # its limit, reported as the run's
        os._exit(proxy.status)
    if proxy.task_error:
        sys.stdout.flush()
        sys.stderr.write(f"TaskBoundaryError: {proxy.task_error}\n")
        sys.stderr.flush()
        os._exit(_EXIT_TASK)


def main(entry: str) -> None:
    """Run ``check(candidate)`` against the solution across the boundary; see the module doc."""
    # The prompt (trusted task text, part of the solution's source too) runs before the fork,
    # so the modules it imports (HumanEval's typing) are loaded once for both processes.
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    with open("prompt.py", "rb") as f:
        _exec_prompt(f.read(), ns)
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()  # no collection in either process walks (and copies) what both share
    try:
        pid = os.fork()
    except OSError as exc:  # no solution code has run: the sandbox's limits leave no room
        sys.stderr.write(f"TaskBoundaryError: cannot start the solution's process ({exc})\n")
        sys.stderr.flush()
        os._exit(_EXIT_TASK)
    if pid == 0:
        _solution(entry, req_r, resp_w)
    os.close(req_r)
    os.close(resp_w)
    _PRCTL(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    proxy = _Proxy(pid, req_w, resp_r)
    try:
        _run_tests(entry, proxy, ns)
    except BaseException:
        _finish(proxy)
        raise
    _finish(proxy)
    os.write(3, os.read(4, 256))
