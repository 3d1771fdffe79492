"""κ for code: ``code.first-call.v1`` and ``code.first-tool.v1``.

Example:
    >>> from certd.domains.code import first_call, first_tool
    >>> first_call("def f(xs):\\n    return sorted(xs)[0]\\n", "f").label
    'sorted'
    >>> first_call("import collections\\ndef f(s):\\n    return collections.Counter(s)", "f").label
    'collections.Counter'
    >>> first_call("from heapq import heappush as push\\ndef f(h):\\n    push(h, 1)\\n", "f").label
    'heapq.heappush'
    >>> first_tool('<tool_call>{"name": "search", "arguments": {}}</tool_call>').label
    'search'

``code.first-call.v1`` — the first call the solution makes, in execution order, inside its entry
function (function tests: ``entry_point``; stdin/stdout programs: the module's top-level code),
read from the syntax tree, never by running it:

* Execution order is Python's evaluation order: in ``f(g(x))`` the argument ``g(x)`` is called
  first, so ``return sorted(set(xs))`` is labelled ``set``; an assignment's value before its
  target; a ``for`` loop's iterable before its body; an ``if``'s test before its branches (the
  first branch in source order when the test makes no call). Nested ``def``/``lambda`` bodies
  are not executed where they are written and are skipped.
* A call to a function the program defines itself (``helper(x)``, ``main()``) is followed
  into that function (at most 8 levels), so the label names the first library call.
* Names are normalised through the imports: ``from collections import Counter as C`` makes
  ``C(s)`` → ``collections.Counter``; ``import numpy as np`` makes ``np.sort`` → ``numpy.sort``;
  builtins keep their name (``sorted``, ``len``, ``range``); a method on a value is
  ``.method`` (``xs.append(1)`` → ``.append``; ``"".join(p)`` → ``str.join``).
* No call at all: ``none``. C and C++: the first identifier called in ``main``'s body
  (keywords, casts and ``sizeof`` excluded), e.g. ``scanf``, ``std::sort``.

``code.first-tool.v1`` — the first tool a tool-calling trajectory names: the first
``<tool_call>{"name": ...}</tool_call>`` block or the first entry of an OpenAI-style
``tool_calls`` list (``{"function": {"name": ...}}``), whichever comes first in the text;
``none`` when there is none.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator

from certd.domains.verdict import Family

from .clex import c_tokens
from .names import KAPPA_FIRST_CALL, KAPPA_FIRST_TOOL
from .pyast import parse_python

__all__ = ["first_call", "first_call_c", "first_call_label", "first_tool"]

_MAX_DEPTH = 8
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")
_MAX_TOOL_CALLS_TRIED = 8
_C_SKIP = frozenset(
    "if for while switch return sizeof alignof decltype static_cast dynamic_cast "
    "reinterpret_cast const_cast catch typeid defined int long char double float short "
    "unsigned signed bool void auto main".split()
)


def _imports(tree: ast.Module) -> dict[str, str]:
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    names[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _dotted(node: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


class _FirstCall:
    def __init__(self, tree: ast.Module) -> None:
        self.imports = _imports(tree)
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.setdefault(node.name, node)

    def name(self, call: ast.Call) -> str:
        func = call.func
        dotted = _dotted(func)
        if dotted is not None:
            head = dotted[0]
            if head in self.imports:
                return ".".join([self.imports[head], *dotted[1:]])
            if len(dotted) == 1:
                return head
            return "." + dotted[-1]
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Constant) and isinstance(func.value.value, str | bytes):
                return f"{type(func.value.value).__name__}.{func.attr}"
            return "." + func.attr
        return "<call>"

    def calls(self, node: ast.AST, depth: int) -> Iterator[str]:
        """Calls in evaluation order, following the program's own functions."""
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            return
        if isinstance(node, ast.Call):
            for child in [node.func, *node.args, *(k.value for k in node.keywords)]:
                yield from self.calls(child, depth)
            dotted = _dotted(node.func)
            if dotted and len(dotted) == 1 and dotted[0] in self.functions and depth < _MAX_DEPTH:
                yield from self.body(self.functions[dotted[0]].body, depth + 1)
                return
            yield self.name(node)
            return
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            value = node.value
            if value is not None:
                yield from self.calls(value, depth)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                yield from self.calls(t, depth)
            return
        if isinstance(node, ast.For | ast.AsyncFor):
            yield from self.calls(node.iter, depth)
            yield from self.body(node.body, depth)
            yield from self.body(node.orelse, depth)
            return
        if isinstance(node, ast.comprehension):
            yield from self.calls(node.iter, depth)
            for cond in node.ifs:
                yield from self.calls(cond, depth)
            return
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            for gen in node.generators:
                yield from self.calls(gen, depth)
            parts: list[ast.expr] = (
                [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            )
            for part in parts:
                yield from self.calls(part, depth)
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # a docstring
        for sub in ast.iter_child_nodes(node):
            yield from self.calls(sub, depth)

    def body(self, stmts: list[ast.stmt], depth: int) -> Iterator[str]:
        for stmt in stmts:
            yield from self.calls(stmt, depth)


def first_call_label(program: str, entry_point: str | None) -> str:
    """The ``code.first-call.v1`` label of a Python program.

    Args:
        program: The full program (prompt followed by the extracted code).
        entry_point: The entry function, or None for the module's top-level code.

    Returns:
        The label (``none`` when no call is made or the program does not parse).
    """
    try:
        tree = parse_python(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "none"
    walker = _FirstCall(tree)
    if entry_point is None:
        stmts = [s for s in tree.body if not isinstance(s, ast.Import | ast.ImportFrom)]
        calls = walker.body(stmts, 0)
    else:
        entry = None
        for node in tree.body:  # the last top-level definition wins, as at run time
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name == entry_point
            ):
                entry = node
        if entry is None:
            return "none"
        walker.functions[entry_point] = entry
        calls = walker.body(entry.body, 1)
    try:
        return next(iter(calls), "none")
    except RecursionError:
        return "none"


def _qualified(tokens: list[str], i: int) -> tuple[str, int]:
    """The name starting at ``tokens[i]`` with its ``::`` parts, and the index after it."""
    parts = [tokens[i]]
    i += 1
    while i + 1 < len(tokens) and tokens[i] == "::" and _IDENT.match(tokens[i + 1]):
        parts.append(tokens[i + 1])
        i += 2
    return "::".join(parts), i


def _skip_template(tokens: list[str], i: int) -> int:
    """Index after a balanced ``<...>`` at ``i`` (or ``i`` when there is none)."""
    if i >= len(tokens) or tokens[i] != "<":
        return i
    depth = 0
    for j in range(i, min(len(tokens), i + 64)):
        if tokens[j] in (";", "{", "}"):
            return i
        depth += (tokens[j] == "<") - (tokens[j] == ">")
        if depth == 0:
            return j + 1
    return i


def first_call_c(source: str) -> str:
    """The ``code.first-call.v1`` label of a C/C++ program: the first call in ``main``.

    Args:
        source: The program.

    Returns:
        The label, ``none`` when ``main`` or a call in it is not found.
    """
    tokens = c_tokens(source)
    start = None
    for i in range(len(tokens) - 1):
        if tokens[i] == "main" and tokens[i + 1] == "(":
            try:
                close = tokens.index(")", i + 1)
            except ValueError:
                return "none"
            if close + 1 < len(tokens) and tokens[close + 1] == "{":
                start = close + 2
                break
    if start is None:
        return "none"
    i = start
    while i < len(tokens):
        if not _IDENT.match(tokens[i]):
            i += 1
            continue
        name, after = _qualified(tokens, i)
        j = _skip_template(tokens, after)
        if j < len(tokens) and tokens[j] == "(" and name.split("::")[-1] not in _C_SKIP:
            return name[:200]
        i = after
    return "none"


def first_call(program: str, entry_point: str | None, language: str = "python") -> Family:
    """The ``code.first-call.v1`` family of a program.

    Args:
        program: The full program.
        entry_point: The entry function (Python function tests) or None.
        language: ``python``, ``c`` or ``cpp``.

    Returns:
        The family.
    """
    label = (
        first_call_label(program, entry_point) if language == "python" else first_call_c(program)
    )
    return Family(kappa=KAPPA_FIRST_CALL, label=label, fields={"call": label})


_TOOL_CALLS = re.compile(r'"tool_calls"\s*:\s*\[')
_OPEN, _CLOSE = "<tool_call>", "</tool_call>"


def _tool_from_tag(text: str) -> tuple[int, str] | None:
    pos = 0
    while True:  # str.find pairs each opening tag with the next closing one: linear
        start = text.find(_OPEN, pos)
        if start < 0:
            return None
        end = text.find(_CLOSE, start)
        if end < 0:
            return None
        try:
            obj = json.loads(text[start + len(_OPEN) : end])
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            name = obj.get("name")
            if not isinstance(name, str) and isinstance(obj.get("function"), dict):
                name = obj["function"].get("name")
            if isinstance(name, str) and name:
                return start, name
        pos = end + len(_CLOSE)


def _tool_from_openai(text: str) -> tuple[int, str] | None:
    decoder = json.JSONDecoder()
    for n, m in enumerate(_TOOL_CALLS.finditer(text)):
        if n >= _MAX_TOOL_CALLS_TRIED:
            return None
        try:
            calls, _ = decoder.raw_decode(text, m.end() - 1)
        except ValueError:
            continue
        for call in calls if isinstance(calls, list) else []:
            fn = call.get("function") if isinstance(call, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            if isinstance(name, str) and name:
                return m.start(), name
    return None


def first_tool(trajectory: str) -> Family:
    """The ``code.first-tool.v1`` family: the first tool a trajectory names.

    Args:
        trajectory: The response text (may contain ``<tool_call>`` blocks or a JSON message
            with ``tool_calls``).

    Returns:
        The family (label ``none`` when no tool is called).
    """
    found = [f for f in (_tool_from_tag(trajectory), _tool_from_openai(trajectory)) if f]
    label = min(found)[1][:200] if found else "none"
    return Family(kappa=KAPPA_FIRST_TOOL, label=label, fields={"tool": label})
