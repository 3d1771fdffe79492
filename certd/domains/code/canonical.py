"""The gate's same-solution key: the syntax tree with variables renamed, comments dropped.

Example:
    >>> from certd.domains.code import canonical_form
    >>> a = "def f(xs):\\n    '''S.'''\\n    t = 0  # sum\\n    for x in xs: t += x\\n    return t"
    >>> b = "def f(items):\\n    acc = 0\\n    for it in items: acc += it\\n    return acc\\n"
    >>> canonical_form(a, "python") == canonical_form(b, "python")
    True
    >>> c = "def f(xs):\\n    return sum(xs)\\n"
    >>> canonical_form(c, "python") == canonical_form(b, "python")
    False

Python: ``ast.parse`` (comments vanish), docstrings dropped, every name the program binds
(parameters, assignment and loop targets, ``def``/``class`` names, comprehension variables,
``global``/``nonlocal`` names, exception names) renamed ``v0, v1, ...`` in order of first
appearance; names it does not bind (builtins, imported modules and names) and attribute names
keep their spelling; then ``ast.dump`` without positions, hashed. C/C++: comments dropped, the
tokens kept, identifiers that are not keywords, not called (``name(``), not members
(``.name``/``->name``) and not qualified (``std::name``) renamed in order of appearance.
"""

from __future__ import annotations

import ast
import hashlib
import re

from .clex import c_tokens
from .pyast import parse_python

__all__ = ["canonical_form"]

_C_KEEP = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if "
    "inline int long register restrict return short signed sizeof static struct switch typedef "
    "union unsigned void volatile while bool true false class namespace using template typename "
    "public private protected new delete this operator const_cast static_cast try catch throw "
    "std include define cin cout cerr endl printf scanf puts getchar putchar string vector map "
    "set pair size_t main".split()
)


class _Renamer(ast.NodeTransformer):
    def __init__(self, bound: set[str]) -> None:
        self.bound = bound
        self.names: dict[str, str] = {}

    def rename(self, name: str) -> str:
        if name not in self.bound:
            return name
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.rename(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.rename(node.arg)
        node.annotation = None
        return node

    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> ast.AST:
        node.name = self.rename(node.name)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            if isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        if not isinstance(node, ast.ClassDef):
            node.returns = None
        self.generic_visit(node)
        return node

    visit_FunctionDef = _visit_def
    visit_AsyncFunctionDef = _visit_def
    visit_ClassDef = _visit_def

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        if node.name:
            node.name = self.rename(node.name)
        self.generic_visit(node)
        return node

    def visit_Global(self, node: ast.Global) -> ast.AST:
        node.names = [self.rename(n) for n in node.names]
        return node

    def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.AST:
        node.names = [self.rename(n) for n in node.names]
        return node


def _bound_names(tree: ast.Module) -> set[str]:
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound


def _python(code: str) -> str:
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "unparsed:" + hashlib.sha256(code.encode()).hexdigest()
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            tree.body = body[1:]
    try:
        tree = _Renamer(_bound_names(tree)).visit(tree)
        dumped = ast.dump(tree, annotate_fields=False, include_attributes=False)
    except RecursionError:
        return "unparsed:" + hashlib.sha256(code.encode()).hexdigest()
    return "py-ast:" + hashlib.sha256(dumped.encode()).hexdigest()


def _c(code: str) -> str:
    tokens = c_tokens(code)
    names: dict[str, str] = {}
    out: list[str] = []
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1] if i else ""
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if (
            re.match(r"[A-Za-z_]", tok)
            and tok not in _C_KEEP
            and nxt not in ("(", "::")
            and prev not in (".", "->", "::", "#")
        ):
            tok = names.setdefault(tok, f"v{len(names)}")
        out.append(tok)
    return "c-tokens:" + hashlib.sha256(" ".join(out).encode()).hexdigest()


def canonical_form(code: str, language: str) -> str:
    """The same-solution key of a program.

    Args:
        code: The solution code (the part the response wrote).
        language: ``python``, ``c`` or ``cpp``.

    Returns:
        ``py-ast:<sha256>`` / ``c-tokens:<sha256>`` (``unparsed:<sha256 of the text>`` when
        Python code does not parse).
    """
    return _python(code) if language == "python" else _c(code)
