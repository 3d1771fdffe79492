"""``ast.parse`` for the code domain, safe to call from several threads at once.

Example:
    >>> from certd.domains.code.pyast import parse_python
    >>> type(parse_python("def f(x):\\n    return x + 1\\n").body[0]).__name__
    'FunctionDef'

CPython 3.11 (this project's interpreter, 3.11.7) keeps the recursion depth of the conversion
from its C syntax tree to ``ast`` objects in state shared by the interpreter's threads. A
thread switch inside that conversion (a garbage collection that runs a finalizer is enough)
lets a second thread's ``ast.parse`` move the count, and the first one raises ``SystemError:
AST constructor recursion depth mismatch``: an honest program's check fails for the server's
own reasons. certd checks a batch's programs on several threads (the syntax check, the κ
label, the test split and the canonical form all parse), so every parse in the code domain
goes through this one lock. The parse holds the GIL throughout anyway, so the lock costs no
parallelism. ``tests/unit/code_domain/test_pyast.py`` provokes the switch.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse_python"]

_LOCK = threading.Lock()


def parse_python(source: str) -> ast.Module:
    """Parse Python source (never run it), one thread at a time.

    Args:
        source: The program text.

    Returns:
        Its syntax tree.

    Raises:
        SyntaxError, ValueError, RecursionError, MemoryError: as ``ast.parse`` raises them.
    """
    with _LOCK:
        return ast.parse(source)
