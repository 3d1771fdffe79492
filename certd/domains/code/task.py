"""Code tasks: Python function tests (HumanEval layout) or stdin/stdout cases.

Example:
    >>> from certd.domains.code import CodeTask, IoCase
    >>> test = "def check(c):\\n    assert c(1) == 2\\n"
    >>> t = CodeTask.function_tests(prompt="def f(x):\\n", test=test, entry_point="f")
    >>> t.mode
    'function'
    >>> CodeTask.io_cases("cpp", [IoCase("1 2\\n", "3\\n")], compare="whitespace").language
    'cpp'
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from certd.errors import LimitExceededError

from .errors import CodeTaskError

__all__ = [
    "CodeLimits",
    "CodeTask",
    "Comparison",
    "IoCase",
    "LANGUAGES",
    "parse_compare",
]

LANGUAGES = ("c", "cpp", "python")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")


@dataclass(frozen=True)
class CodeLimits:
    """Size limits on code tasks and responses (bytes and counts).

    Attributes:
        max_program_bytes: Largest prompt, test code or extracted program.
        max_cases: Most stdin/stdout cases in one task.
        max_case_bytes: Largest stdin or expected stdout of one case.
        max_response_bytes: Largest response text.
    """

    max_program_bytes: int = 256 * 1024
    max_cases: int = 256
    max_case_bytes: int = 1024 * 1024
    max_response_bytes: int = 512 * 1024


@dataclass(frozen=True)
class Comparison:
    """How a case's stdout is compared with the expected one (outside the sandbox).

    Attributes:
        mode: ``exact`` (bytes), ``whitespace`` (tokens split on whitespace) or ``float``
            (tokens; numbers within ``tolerance`` absolute or relative, others exact).
        tolerance: The float tolerance (0 unless ``mode`` is ``float``).
    """

    mode: str
    tolerance: float = 0.0

    @property
    def spec(self) -> str:
        """The wire spelling: ``exact``, ``whitespace`` or ``float:TOL``."""
        return f"float:{self.tolerance:g}" if self.mode == "float" else self.mode


def parse_compare(spec: str) -> Comparison:
    """Parse ``exact`` | ``whitespace`` | ``float:TOL``.

    Args:
        spec: The declared comparison.

    Returns:
        The comparison.

    Raises:
        CodeTaskError: The spelling is not one of those.
    """
    if spec in ("exact", "whitespace"):
        return Comparison(spec)
    if spec.startswith("float:"):
        try:
            tol = float(spec[6:])
        except ValueError:
            tol = -1.0
        if math.isfinite(tol) and 0 <= tol < 1:
            return Comparison("float", tol)
    raise CodeTaskError(f"compare: expected 'exact', 'whitespace' or 'float:TOL', got {spec!r}")


@dataclass(frozen=True)
class IoCase:
    """One stdin/stdout case."""

    stdin: str
    stdout: str


@dataclass(frozen=True)
class CodeTask:
    """A code task.

    Attributes:
        language: ``python``, ``c`` or ``cpp``.
        prompt: (function mode) Code the program starts with; the response's code follows it.
        test: (function mode) Test code defining ``check(candidate)``.
        entry_point: (function mode) The function ``check`` receives.
        cases: (io mode) The stdin/stdout cases.
        compare: (io mode) How stdout is compared.
    """

    language: str
    prompt: str = ""
    test: str = ""
    entry_point: str = ""
    cases: tuple[IoCase, ...] = ()
    compare: Comparison = Comparison("exact")

    @property
    def mode(self) -> str:
        """``function`` (HumanEval layout) or ``io`` (stdin/stdout cases)."""
        return "io" if self.cases else "function"

    @classmethod
    def function_tests(
        cls,
        *,
        prompt: str,
        test: str,
        entry_point: str,
        limits: CodeLimits | None = None,
    ) -> CodeTask:
        """A Python function-test task in the HumanEval layout.

        Args:
            prompt: The prefix (signature and docstring), may be empty.
            test: Test code defining ``check(candidate)``.
            entry_point: The function under test.
            limits: Size limits.

        Returns:
            The validated task.

        Raises:
            CodeTaskError: A missing test or a bad entry point.
            LimitExceededError: A part is larger than allowed.
        """
        lim = limits or CodeLimits()
        for name, text in (("prompt", prompt), ("test", test)):
            if len(text.encode()) > lim.max_program_bytes:
                raise LimitExceededError(f"{name}: larger than {lim.max_program_bytes} bytes")
        if not test.strip():
            raise CodeTaskError("test: expected test code defining check(candidate), got ''")
        if not _IDENT.match(entry_point):
            raise CodeTaskError(f"entry_point: expected an identifier, got {entry_point!r}")
        return cls(language="python", prompt=prompt, test=test, entry_point=entry_point)

    @classmethod
    def io_cases(
        cls,
        language: str,
        cases: Sequence[IoCase],
        *,
        compare: str = "exact",
        limits: CodeLimits | None = None,
    ) -> CodeTask:
        """A stdin/stdout task.

        Args:
            language: ``python``, ``c`` or ``cpp``.
            cases: At least one case.
            compare: ``exact``, ``whitespace`` or ``float:TOL``.
            limits: Size limits.

        Returns:
            The validated task.

        Raises:
            CodeTaskError: Unknown language, no cases or a bad comparison.
            LimitExceededError: Too many or too large cases.
        """
        lim = limits or CodeLimits()
        if language not in LANGUAGES:
            raise CodeTaskError(f"language: expected one of {LANGUAGES}, got {language!r}")
        if not cases:
            raise CodeTaskError("cases: expected at least one case, got none")
        if len(cases) > lim.max_cases:
            raise LimitExceededError(f"cases: more than {lim.max_cases}")
        for i, case in enumerate(cases):
            if max(len(case.stdin.encode()), len(case.stdout.encode())) > lim.max_case_bytes:
                raise LimitExceededError(f"cases[{i}]: larger than {lim.max_case_bytes} bytes")
        return cls(language=language, cases=tuple(cases), compare=parse_compare(compare))
