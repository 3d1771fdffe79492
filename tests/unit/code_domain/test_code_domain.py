"""The code domain's pure parts: tasks, extraction, comparison, judging, κ, canonical form."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from certd.domains.code import (
    HARNESS_MODULE,
    CodeTask,
    CodeTaskError,
    IoCase,
    canonical_form,
    compare_output,
    extract_program,
    first_call,
    first_tool,
    function_program,
    judge_cases,
    judge_compile,
    judge_function,
    parse_compare,
    python_syntax_error,
)
from certd.domains.verdict import Status
from certd.errors import LimitExceededError
from sandboxes import ExecResult, ExecStatus

MODULES = [
    "certd.domains.code",
    "certd.domains.code.canonical",
    "certd.domains.code.clex",
    "certd.domains.code.compare",
    "certd.domains.code.errors",
    "certd.domains.code.extract",
    "certd.domains.code.judge",
    "certd.domains.code.kappa",
    "certd.domains.code.names",
    "certd.domains.code.task",
    "sandboxes",
    "sandboxes.errors",
    "sandboxes.limits",
    "sandboxes.program",
    "sandboxes.result",
    "sandboxes.seccomp",
    "sandboxes.doctor",
    "sandboxes.cgroups",
]


@pytest.mark.parametrize("name", MODULES)
def test_every_module_has_an_example(name: str) -> None:
    """Each module opens with a runnable example (tests/unit/test_doctests.py runs it)."""
    module = importlib.import_module(name)
    assert module.__doc__ and ">>>" in module.__doc__, f"{name} has no runnable example"


def result(status: ExecStatus = ExecStatus.OK, **kw: object) -> ExecResult:
    base: dict[str, object] = {
        "status": status,
        "exit_code": 0 if status is ExecStatus.OK else 1,
        "signal": None,
        "stdout": b"",
        "stderr": b"",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "cpu_time_s": 0.01,
        "wall_time_s": 0.01,
        "peak_memory_bytes": 1,
    }
    base.update(kw)
    return ExecResult(**base)  # type: ignore[arg-type]


# -- tasks -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: CodeTask.io_cases("java", [IoCase("", "")]),
        lambda: CodeTask.io_cases("python", []),
        lambda: CodeTask.io_cases("python", [IoCase("", "")], compare="float:x"),
        lambda: CodeTask.io_cases("python", [IoCase("", "")], compare="float:nan"),
        lambda: CodeTask.function_tests(prompt="", test="", entry_point="f"),
        lambda: CodeTask.function_tests(prompt="", test="def check(c): pass", entry_point="1x"),
    ],
)
def test_malformed_tasks_are_refused(make: object) -> None:
    with pytest.raises(CodeTaskError):
        make()  # type: ignore[operator]


def test_oversized_tasks_are_refused() -> None:
    with pytest.raises(LimitExceededError):
        CodeTask.io_cases("python", [IoCase("", "")] * 1000)
    with pytest.raises(LimitExceededError):
        CodeTask.function_tests(prompt="x" * 10**6, test="t", entry_point="f")


# -- extraction and comparison -----------------------------------------------------------------


def test_extraction_prefers_the_last_block_of_the_language() -> None:
    text = "```python\na=1\n```\n```bash\nrm -rf /\n```\n```py\nb=2\n```\ntext"
    assert extract_program(text, "python") == "b=2\n"
    assert extract_program(text, "python", which="first") == "a=1\n"
    assert extract_program("```\nint main(){}\n```", "c") == "int main(){}\n"
    assert extract_program("~~~cpp\nx\n~~~", "cpp") == "x\n"
    assert extract_program("```python\nunterminated", "python") == "unterminated"
    assert extract_program("no fences", "python") == "no fences"


@pytest.mark.parametrize(
    ("expected", "actual", "spec", "ok"),
    [
        ("1 2\n", "1 2\n", "exact", True),
        ("1 2\n", "1 2", "exact", False),
        ("1 2\n", " 1\n2 ", "whitespace", True),
        ("1 2\n", "1 2 3", "whitespace", False),
        ("1 2\n", "1", "whitespace", False),
        ("0.5\n", "0.5000001", "float:1e-6", True),
        ("0.5\n", "0.51", "float:1e-6", False),
        ("1e9\n", "1000000000.5", "float:1e-6", True),
        ("nan\n", "nan", "float:1e-6", True),
        ("1.0\n", "nan", "float:1e-6", False),
        ("yes 1.0\n", "no 1.0", "float:1e-6", False),
    ],
)
def test_compare(expected: str, actual: str, spec: str, ok: bool) -> None:
    assert compare_output(expected, actual, parse_compare(spec)) is ok


# -- judging -----------------------------------------------------------------------------------

TASK = CodeTask.function_tests(
    prompt="def add(a, b):\n",
    test="def check(c):\n    assert c(1, 2) == 3\n    assert c(2, 2) == 4\n",
    entry_point="add",
)


def test_function_program_layout() -> None:
    prog = function_program(TASK, "    return a + b\n")
    assert prog.completion_channel and prog.inline_python
    assert prog.files["solution.py"] == b"def add(a, b):\n    return a + b\n"
    assert b"'add'" in prog.files["main.py"]
    assert {"harness.bin", "harness.py"} <= set(prog.files)


def test_a_preloaded_harness_is_not_shipped_and_its_absence_is_a_task_error(
    tmp_path: Path,
) -> None:
    """With ``preloaded=True`` the run carries no harness; a template without it (the
    sandbox's fault) ends the run as a task error, which judges as INFRA_ERROR."""
    prog = function_program(TASK, "    return a + b\n", preloaded=True)
    assert set(prog.files) == {"main.py", "prompt.py", "solution.py", "tests.py"}
    assert HARNESS_MODULE.encode() in prog.files["main.py"]
    for name, data in prog.files.items():
        (tmp_path / name).write_bytes(data)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "main.py"], cwd=tmp_path, capture_output=True, timeout=60
    )
    assert done.returncode == 3, done.stderr
    res = result(ExecStatus.RUNTIME_ERROR, exit_code=done.returncode, stderr=done.stderr)
    outcome = judge_function(TASK, res)
    assert outcome.status is Status.INFRA_ERROR and "not preloaded" in outcome.reason


@pytest.mark.parametrize(
    ("res", "status", "index"),
    [
        (result(completed=True), Status.CORRECT, None),
        (result(completed=False), Status.WRONG_ANSWER, None),  # sys.exit(0) before the nonce
        (
            result(completed=True, exit_code=1, status=ExecStatus.RUNTIME_ERROR),
            Status.RUNTIME_ERROR,
            None,
        ),
        (
            result(
                ExecStatus.RUNTIME_ERROR,
                stderr=b'Traceback:\n  File "tests.py", line 3, in check\nAssertionError\n',
            ),
            Status.WRONG_ANSWER,
            1,
        ),
        (
            result(ExecStatus.RUNTIME_ERROR, stderr=b"ZeroDivisionError: x"),
            Status.RUNTIME_ERROR,
            None,
        ),
        (result(ExecStatus.TIME_LIMIT), Status.TIME_LIMIT, None),
        (result(ExecStatus.MEMORY_LIMIT), Status.MEMORY_LIMIT, None),
        (result(ExecStatus.OUTPUT_LIMIT), Status.RUNTIME_ERROR, None),
        (result(ExecStatus.SANDBOX_ERROR), Status.INFRA_ERROR, None),
        # A printed success marker changes nothing without the nonce.
        (result(stdout=b"all tests passed\nOK\n"), Status.WRONG_ANSWER, None),
    ],
)
def test_judge_function(res: ExecResult, status: Status, index: int | None) -> None:
    out = judge_function(TASK, res)
    assert (out.status, out.failing_case) == (status, index)
    assert out.pass_fraction == (1.0 if status is Status.CORRECT else 0.0)


def test_judge_cases_compares_outside_and_counts() -> None:
    task = CodeTask.io_cases("python", [IoCase("", "1\n"), IoCase("", "2\n"), IoCase("", "3\n")])
    out = judge_cases(
        task,
        [result(stdout=b"1\n"), result(stdout=b"x\n"), result(ExecStatus.TIME_LIMIT)],
    )
    assert (out.status, out.failing_case) == (Status.WRONG_ANSWER, 1)
    assert out.pass_fraction == pytest.approx(1 / 3)
    out = judge_cases(task, [result(stdout=b"1\n"), result(stdout=b"2\n"), result(stdout=b"3\n")])
    assert (out.status, out.pass_fraction) == (Status.CORRECT, 1.0)
    # Truncated or extra output is a wrong answer.
    out = judge_cases(task, [result(stdout=b"1\n"), result(stdout=b"2\n4\n"), result(stdout=b"")])
    assert (out.status, out.failing_case) == (Status.WRONG_ANSWER, 1)
    out = judge_cases(task, [result(ExecStatus.SANDBOX_ERROR)] * 3)
    assert out.status is Status.INFRA_ERROR


def test_judge_compile() -> None:
    assert judge_compile(result(stdout=b"\x7fELF")) is None
    bad = result(ExecStatus.RUNTIME_ERROR, stderr=b"main.c:1:1: error: expected ';'\n")
    out = judge_compile(bad)
    assert out is not None and out.status is Status.COMPILE_ERROR and "expected" in out.reason


def test_python_syntax_error() -> None:
    assert python_syntax_error("x = 1") is None
    assert python_syntax_error("def f(:\n") is not None
    assert python_syntax_error("(" * 1000 + ")" * 1000) is not None


# -- κ -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "entry", "label"),
    [
        ("def f(xs):\n    '''doc'''\n    return sorted(set(xs))\n", "f", "set"),
        ("def f(xs):\n    xs.sort()\n    return xs\n", "f", ".sort"),
        ("def f(p):\n    return ''.join(p)\n", "f", "str.join"),
        ("import numpy as np\ndef f(a):\n    return np.sort(a)\n", "f", "numpy.sort"),
        (
            "from collections import Counter as C\ndef f(s):\n    return C(s)\n",
            "f",
            "collections.Counter",
        ),
        ("def h(x):\n    return abs(x)\ndef f(x):\n    return h(x)\n", "f", "abs"),
        ("def f(x):\n    return x + 1\n", "f", "none"),
        ("def f(x):\n    for i in range(x):\n        print(i)\n", "f", "range"),
        ("def f(x):\n    g = lambda: len(x)\n    return max(x)\n", "f", "max"),
        ("def f(x):\n    if x:\n        return min(x)\n    return len(x)\n", "f", "min"),
        ("def main():\n    n = int(input())\n    print(n)\nmain()\n", None, "input"),
        ("import sys\nprint(sys.stdin.read())\n", None, "sys.stdin.read"),
        ("def f(:\n", "f", "none"),
        ("def f(x):\n    return f(x)\n", "f", "f"),  # recursion is followed 8 levels, then named
    ],
)
def test_first_call(program: str, entry: str | None, label: str) -> None:
    assert first_call(program, entry).label == label


def test_first_call_c() -> None:
    src = '#include <cstdio>\n// main() { foo(); }\nint main() { int n; scanf("%d", &n); }'
    assert first_call(src, None, "c").label == "scanf"
    cpp = "int main(){ std::vector<int> v; if (true) std::sort(v.begin(), v.end()); }"
    assert first_call(cpp, None, "cpp").label == "std::sort"
    assert first_call("int main(){ return 0; }", None, "c").label == "none"


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ('<tool_call>{"name": "search", "arguments": {"q": 1}}</tool_call>', "search"),
        (
            '{"role": "assistant", "tool_calls": [{"id": "1", "type": "function", '
            '"function": {"name": "run_python", "arguments": "{}"}}]}',
            "run_python",
        ),
        ('<tool_call>nope</tool_call><tool_call>{"name": "b"}</tool_call>', "b"),
        ("no tools here", "none"),
        (
            '<tool_call>{"name": "first"}</tool_call> "tool_calls": [{"function": {"name": "x"}}]',
            "first",
        ),
    ],
)
def test_first_tool(text: str, label: str) -> None:
    fam = first_tool(text)
    assert (fam.kappa, fam.label) == ("code.first-tool.v1", label)


# -- canonical form ----------------------------------------------------------------------------


def test_canonical_renames_variables_and_drops_comments_and_docstrings() -> None:
    a = 'def f(xs):\n    """Doc."""\n    best = None  # track\n'
    a += "    for x in xs:\n        best = x\n    return best\n"
    b = "def f(items):\n    m = None\n    for it in items:\n        m = it\n    return m\n"
    c = "def f(items):\n    m = None\n    for it in items:\n        m = it\n    return len(items)\n"
    assert canonical_form(a, "python") == canonical_form(b, "python")
    assert canonical_form(b, "python") != canonical_form(c, "python")
    # Builtins and attributes keep their names: sorted() is not max().
    assert canonical_form("def f(x):\n    return sorted(x)", "python") != canonical_form(
        "def f(x):\n    return max(x)", "python"
    )


def test_canonical_c() -> None:
    a = 'int main(){ int n; /* c */ scanf("%d", &n); printf("%d", n*2); } // end'
    b = 'int main(){ int k; scanf("%d", &k); printf("%d", k*2); }'
    c = 'int main(){ int k; scanf("%d", &k); printf("%d", k+k); }'
    assert canonical_form(a, "c") == canonical_form(b, "c") != canonical_form(c, "c")


# -- adversarial inputs stay linear --------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "/* " * 80_000,
        '"' + "a" * 200_000,
        "a" * 250_000,
        "int main() { " + "x::" * 60_000 + "y",
        "int main() { " + "f<" * 60_000,
    ],
)
def test_c_scans_of_hostile_sources_finish(text: str) -> None:
    assert first_call(text, None, "c").label
    assert canonical_form(text, "cpp").startswith("c-tokens:")


def test_tool_scans_of_hostile_trajectories_finish() -> None:
    assert first_tool("<tool_call>" * 40_000).label == "none"
    assert first_tool('"tool_calls": [' * 30_000).label == "none"
    assert first_tool("<tool_call>{</tool_call>" * 20_000 + '<tool_call>{"name":"z"}</tool_call>')


def test_code_task_digest_covers_every_field_and_defaults_compare() -> None:
    from certd.statements import task_digest
    from forkgate import make_task

    base = {"language": "python", "cases": [{"stdin": "1", "stdout": "1"}]}
    d0 = task_digest(make_task("code", base))
    assert d0 == task_digest(make_task("code", dict(base, compare="exact")))
    assert d0 != task_digest(make_task("code", dict(base, compare="whitespace")))
    assert d0 != task_digest(make_task("code", dict(base, language="c")))
    fn = {"language": "python", "prompt": "p", "test": "t", "entry_point": "f"}
    d1 = task_digest(make_task("code", fn))
    for key in ("prompt", "test", "entry_point"):
        assert d1 != task_digest(make_task("code", dict(fn, **{key: "x"})))
    with pytest.raises(ValueError, match="cases"):
        make_task("code", {"cases": "nope"})
