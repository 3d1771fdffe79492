"""Small modules and functions (STYLE.md, rule 4): no file past 500 lines, no function past 60.

A function is measured from its ``def`` line to its last line, less its docstring: the Args /
Raises / Returns that rule 5 asks for are not what makes a function hard to change. Covers the
packages and the benchmark and maintenance scripts; the generated ``certd/v1`` stubs are not
code anyone edits.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("certd", "sandboxes", "client", "bench", "scripts")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted(
        p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py") if "/v1/" not in str(p)
    )


def _docstring_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return (first.end_lineno or first.lineno) - first.lineno + 1
    return 0


def _long_functions(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1 - _docstring_lines(node)
            if lines > MAX_FUNCTION_LINES:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines")
    return out


def test_the_check_sees_the_tree() -> None:
    """A path mistake would pass every file by finding none."""
    names = {str(p.relative_to(ROOT)) for p in _sources()}
    assert {"certd/cli.py", "client/client.py", "sandboxes/_zygote.py", "bench/_common.py"} <= names


def test_no_file_past_500_lines() -> None:
    long = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for p in _sources()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES
    ]
    assert not long, "split along a seam (STYLE.md rule 4):\n" + "\n".join(long)


def test_no_function_past_60_lines() -> None:
    long = [f for p in _sources() for f in _long_functions(p)]
    assert not long, "not counting docstrings (STYLE.md rule 4):\n" + "\n".join(long)


def test_a_docstring_does_not_count() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(59))
    doc = '    """' + "\n" * 30 + '    """'
    node = ast.parse(f"def f():\n{doc}\n{body}\n").body[0]
    assert isinstance(node, ast.FunctionDef)
    assert node.end_lineno is not None
    assert node.end_lineno - node.lineno + 1 - _docstring_lines(node) == 60
