"""Programs to run for a code task, and verdicts from what the sandbox observed.

Example:
    >>> from certd.domains.code import CodeTask, IoCase, case_programs, judge_cases
    >>> task = CodeTask.io_cases("python", [IoCase("2 3\\n", "5\\n")], compare="whitespace")
    >>> [p.argv for p in case_programs(task, "a, b = map(int, input().split()); print(a + b)")]
    [('python3', 'main.py')]

The verifier never trusts what a program says about itself:

* stdin/stdout cases: the program only produces bytes; the comparison runs here, outside the
  sandbox, under the task's declared comparison.
* function tests (HumanEval layout): the tests run in a process that never imports the
  solution; ``candidate`` is a proxy to a second process that holds it, and values cross as
  data through ``_codec.py`` (``_harness.py`` has the protocol). Only the test process holds
  the completion channel: it reads a one-time nonce from fd 4 and writes it to fd 3 after
  ``check`` returned with no fault of the solution recorded. Only a run that hands back exactly
  that nonce *and* exits 0 is CORRECT. docs/code-domain.md says what the boundary guarantees
  and what it does not.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import marshal
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from certd.domains.verdict import Status
from sandboxes.program import Program
from sandboxes.result import ExecResult, ExecStatus

from .compare import compare_output
from .pyast import parse_python
from .task import CodeTask

__all__ = [
    "COMPILE_COMMANDS",
    "HARNESS_MODULE",
    "HARNESS_SOURCE",
    "Outcome",
    "case_programs",
    "compile_program",
    "function_program",
    "judge_cases",
    "judge_compile",
    "judge_function",
    "python_syntax_error",
]

COMPILE_COMMANDS = {
    "c": "gcc -O2 -std=gnu17 -pipe -o prog main.c -lm >&2 && cat prog",
    "cpp": "g++ -O2 -std=gnu++17 -pipe -o prog main.cpp >&2 && cat prog",
}
_SOURCE_NAME = {"c": "main.c", "cpp": "main.cpp"}

_CODEC_IMPORT = "from ._codec import MAX_FRAME_BYTES, CodecError, decode, encode"
_FUTURE = "from __future__ import annotations\n"
_TYPING = "from typing import Any\n"
_HERE = Path(__file__).parent


def _harness_source() -> str:
    """``main.py`` of a function-test run: the codec, then the harness (both stdlib only)."""
    codec = (_HERE / "_codec.py").read_text(encoding="utf-8")
    harness = (_HERE / "_harness.py").read_text(encoding="utf-8")
    for line in (_CODEC_IMPORT, _FUTURE, _TYPING):
        assert harness.count(line) == 1, f"the harness lost its line {line!r}"
    assert codec.count(_TYPING) == 1, "the codec lost its typing import"
    harness = harness.replace(_FUTURE, "").replace(_CODEC_IMPORT, "pass  # the codec is above")
    # Annotations are never evaluated (``from __future__ import annotations``), and importing
    # typing costs a run more than the rest of the harness: the inlined text goes without it.
    return (codec + "\n" + harness).replace(_TYPING, "")


EXIT_TASK_ERROR = 3  # the harness refused the task (TaskBoundaryError), see _harness.py
_HARNESS = _harness_source()
HARNESS_SOURCE = _HARNESS  # what a sandbox preloads as HARNESS_MODULE (trusted, stdlib only)
# The module name a sandbox's templates preload the harness under (Sandbox.preload); the
# digest in it means a template holding another version of the harness is never used.
HARNESS_MODULE = "forkgate_harness_" + hashlib.sha256(_HARNESS.encode()).hexdigest()[:16]
# Loading the harness costs a run more than the rest of it does: a run finds it preloaded in
# the template; otherwise it gets it compiled (marshal, read by an interpreter with the same
# bytecode magic) and as source.
_HARNESS_CODE = marshal.dumps(compile(_HARNESS, "harness.py", "exec", dont_inherit=True))
_LOADER = """\
import sys as _fg_sys

if @MODULE@ in _fg_sys.modules:
    _fg_sys.modules[@MODULE@].main(@ENTRY@)
else:
    import _frozen_importlib_external as _fg_ext

    if _fg_ext.MAGIC_NUMBER == @MAGIC@:
        import marshal as _fg_marshal

        with open("harness.bin", "rb") as _fg_f:
            _fg_code = _fg_marshal.loads(_fg_f.read())
    else:
        with open("harness.py", "rb") as _fg_f:
            _fg_code = compile(_fg_f.read(), "harness.py", "exec", dont_inherit=True)
    exec(_fg_code)
    main(@ENTRY@)
""".replace("@MAGIC@", repr(importlib.util.MAGIC_NUMBER)).replace("@MODULE@", repr(HARNESS_MODULE))
# Where the caller's sandbox preloads the harness, a run carries no copy of it; a template
# without it (never expected) is the sandbox's fault: a task error, which is an INFRA_ERROR.
_PRELOADED_LOADER = f"""\
import sys as _fg_sys

if {HARNESS_MODULE!r} in _fg_sys.modules:
    _fg_sys.modules[{HARNESS_MODULE!r}].main(@ENTRY@)
else:
    _fg_sys.stderr.write("TaskBoundaryError: the harness was not preloaded in the sandbox\\n")
    _fg_sys.exit({EXIT_TASK_ERROR})
"""
_TESTS_LINE = re.compile(rb'File "tests\.py", line (\d+)')


@dataclass(frozen=True)
class Outcome:
    """A code verdict before κ labelling.

    Attributes:
        status: CORRECT, WRONG_ANSWER, COMPILE_ERROR, RUNTIME_ERROR, TIME_LIMIT, MEMORY_LIMIT,
            or INFRA_ERROR (the sandbox failed; never the program's fault).
        reason: A short human-readable reason ("" when CORRECT).
        failing_case: Index of the first failing case (stdin/stdout) or assert (function
            tests), None when none failed or it is unknown.
        pass_fraction: Cases passed ÷ cases (function tests: 1.0 or 0.0).
    """

    status: Status
    reason: str = ""
    failing_case: int | None = None
    pass_fraction: float = 0.0


def python_syntax_error(code: str) -> str | None:
    """Parse (never run) a Python program.

    Args:
        code: The program.

    Returns:
        None when it parses, else a one-line description of the syntax error.
    """
    try:
        parse_python(code)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"cannot parse: {type(exc).__name__}"
    return None


def function_program(task: CodeTask, code: str, *, preloaded: bool = False) -> Program:
    """The harness run for a function-test task.

    Args:
        task: A ``function`` mode task.
        code: The code extracted from the response.
        preloaded: The sandbox's templates preload the harness as ``HARNESS_MODULE``
            (``Sandbox.preload``): the run carries no copy of it.

    Returns:
        The program (inline Python with a completion channel).
    """
    loader = _PRELOADED_LOADER if preloaded else _LOADER
    files = {
        "main.py": loader.replace("@ENTRY@", repr(task.entry_point)).encode(),
        "prompt.py": task.prompt.encode(),
        "solution.py": (task.prompt + code).encode(),
        "tests.py": task.test.encode(),
    }
    if not preloaded:
        files.update({"harness.bin": _HARNESS_CODE, "harness.py": _HARNESS.encode()})
    return Program(
        argv=("python3", "main.py"),
        files=files,
        inline_python=True,
        completion_channel=True,
    )


def _last_line(data: bytes) -> str:
    lines = [ln for ln in data.decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1].strip()[:200] if lines else ""


def _limit_outcome(result: ExecResult) -> Outcome | None:
    if result.status is ExecStatus.SANDBOX_ERROR:
        return Outcome(Status.INFRA_ERROR, f"sandbox failed: {result.detail}")
    if result.status is ExecStatus.TIME_LIMIT:
        return Outcome(Status.TIME_LIMIT, result.detail)
    if result.status is ExecStatus.MEMORY_LIMIT:
        return Outcome(Status.MEMORY_LIMIT, result.detail)
    if result.status is ExecStatus.OUTPUT_LIMIT:
        return Outcome(Status.RUNTIME_ERROR, result.detail)
    return None


def _assert_index(test: str, line: int) -> int | None:
    try:
        tree = parse_python(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    asserts = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Assert)), key=lambda n: n.lineno
    )
    for i, node in enumerate(asserts):
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            return i
    return None


def judge_function(task: CodeTask, result: ExecResult) -> Outcome:
    """The verdict of a function-test run.

    Args:
        task: The task.
        result: What the sandbox observed.

    Returns:
        The outcome; CORRECT only with the completion nonce back and exit code 0.
    """
    limited = _limit_outcome(result)
    if limited is not None:
        return limited
    if result.completed and result.exit_code == 0 and result.signal is None:
        return Outcome(Status.CORRECT, pass_fraction=1.0)
    last = _last_line(result.stderr)
    if last.startswith("AssertionError"):
        index = None
        lines = _TESTS_LINE.findall(result.stderr)
        if lines:
            index = _assert_index(task.test, int(lines[-1]))
        return Outcome(Status.WRONG_ANSWER, last or "AssertionError", failing_case=index)
    if result.exit_code == 0 and result.signal is None:
        return Outcome(Status.WRONG_ANSWER, "exited before the tests completed")
    if result.exit_code == EXIT_TASK_ERROR and last.startswith("TaskBoundaryError:"):
        return Outcome(Status.INFRA_ERROR, "task error: " + last.split(":", 1)[1].strip())
    return Outcome(Status.RUNTIME_ERROR, last or result.detail)


def compile_program(task: CodeTask, code: str) -> Program:
    """The compile step of a C/C++ task: the binary comes back on stdout.

    Args:
        task: A ``c`` or ``cpp`` task.
        code: The source.

    Returns:
        The compiler run.
    """
    return Program(
        argv=("sh", "-c", COMPILE_COMMANDS[task.language]),
        files={_SOURCE_NAME[task.language]: code.encode()},
    )


def judge_compile(result: ExecResult) -> Outcome | None:
    """Whether a compile step failed.

    Args:
        result: The compile run.

    Returns:
        None when it produced a binary, else the outcome (COMPILE_ERROR or a limit/infra one).
    """
    if result.status is ExecStatus.SANDBOX_ERROR:
        return Outcome(Status.INFRA_ERROR, f"sandbox failed: {result.detail}")
    if result.status is ExecStatus.OK and result.stdout:
        return None
    errors = [
        ln for ln in result.stderr.decode(errors="replace").splitlines() if "error" in ln.lower()
    ]
    reason = (errors[0] if errors else result.detail or "compilation failed").strip()[:200]
    return Outcome(Status.COMPILE_ERROR, reason)


def case_programs(task: CodeTask, code: str, binary: bytes | None = None) -> list[Program]:
    """One run per stdin/stdout case.

    Args:
        task: An ``io`` mode task.
        code: The program (Python source; ignored for C/C++).
        binary: The compiled program for C/C++.

    Returns:
        The programs, in case order.
    """
    if task.language == "python":
        files = {"main.py": code.encode()}
        return [
            Program(
                argv=("python3", "main.py"),
                files=files,
                stdin=c.stdin.encode(),
                inline_python=True,
            )
            for c in task.cases
        ]
    assert binary is not None
    return [
        Program(
            argv=("./prog",),
            files={"prog": binary},
            executables=frozenset({"prog"}),
            stdin=c.stdin.encode(),
        )
        for c in task.cases
    ]


def judge_cases(task: CodeTask, results: Sequence[ExecResult]) -> Outcome:
    """The verdict of a stdin/stdout task; comparison happens here, outside the sandbox.

    Args:
        task: The task.
        results: One result per case, in order.

    Returns:
        The outcome: the first failing case decides the status; the pass fraction counts all.
    """
    passed = 0
    first: Outcome | None = None
    for i, (case, result) in enumerate(zip(task.cases, results, strict=True)):
        failure = _limit_outcome(result)
        if failure is None and not result.ok:
            failure = Outcome(Status.RUNTIME_ERROR, _last_line(result.stderr) or result.detail)
        if failure is None:
            actual = result.stdout.decode("utf-8", errors="replace")
            if compare_output(case.stdout, actual, task.compare):
                passed += 1
                continue
            failure = Outcome(Status.WRONG_ANSWER, f"output differs ({task.compare.spec})")
        if failure.status is Status.INFRA_ERROR:
            return Outcome(Status.INFRA_ERROR, failure.reason, failing_case=i)
        if first is None:
            first = Outcome(failure.status, f"case {i}: {failure.reason}", failing_case=i)
    fraction = passed / len(task.cases)
    if first is None:
        return Outcome(Status.CORRECT, pass_fraction=1.0)
    return Outcome(first.status, first.reason, first.failing_case, fraction)
