"""Every Python parse in certd is safe from several threads (certd/domains/code/pyast.py).

CPython 3.11 raises ``SystemError: AST constructor recursion depth mismatch`` when a thread
switch inside one ``ast.parse`` lets another thread parse (seen in ``make test``: the κ label of
an honest HumanEval solution failed on a batch thread). The provocation: a switch interval of
1 µs and garbage with finalizers, so a collection inside the conversion runs Python code and
hands the GIL over.
"""

from __future__ import annotations

import gc
import re
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from certd.domains.code.canonical import canonical_form
from certd.domains.code.judge import python_syntax_error
from certd.domains.code.kappa import first_call_label
from certd.domains.code.pyast import parse_python

ROOT = Path(__file__).resolve().parents[3]
PROGRAM = "def f(x):\n" + "".join(
    f"    y{i} = [[[x + {i}]]] if x else ({i}, ({i}, [{i}]))\n" for i in range(60)
)


class _Finalized:
    """Garbage in a cycle whose finalizer runs Python code during a collection."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        sum(range(20))


@pytest.fixture()
def switching() -> Iterator[None]:
    interval, threshold = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(100, 1, 1)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*threshold)


def _errors_on_threads(parse: Callable[[str], object]) -> list[BaseException]:
    errors: list[BaseException] = []

    def work() -> None:
        for _ in range(40):
            for _ in range(30):
                _Finalized()
            try:
                parse(PROGRAM)
            except SystemError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.parametrize(
    "parse",
    [
        parse_python,
        python_syntax_error,
        lambda p: first_call_label(p, "f"),
        lambda p: canonical_form(p, "python"),
    ],
    ids=["parse_python", "syntax_check", "kappa_label", "canonical_form"],
)
def test_parses_on_four_threads_never_raise(
    switching: None, parse: Callable[[str], object]
) -> None:
    assert _errors_on_threads(parse) == []


def test_no_parse_in_certd_bypasses_the_lock() -> None:
    """The class, not the four call sites: any ``ast.parse``/``compile(..., PyCF_ONLY_AST)``
    in certd outside pyast.py is a parse that could fail on a batch thread."""
    pattern = re.compile(r"\bast\.parse\(|PyCF_ONLY_AST")
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted((ROOT / "certd").rglob("*.py"))
        if p.name != "pyast.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line) and not line.lstrip().startswith("#")
    ]
    assert found == []
