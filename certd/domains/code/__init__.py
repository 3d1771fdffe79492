"""The code domain: tasks, program extraction, judging, κ and the gate's canonical form.

Example:
    >>> from certd.domains.code import CodeTask, IoCase, extract_program, first_call
    >>> code = extract_program("```python\\nprint(sum(map(int, input().split())))\\n```", "python")
    >>> first_call(code, None).label
    'input'

Pure: nothing here runs a program. ``judge`` builds the ``sandboxes.Program`` runs and turns
the sandbox's observations into verdicts; ``certd.domains.code.checker`` (the edge) runs them
in a warm sandbox pool.
"""

from .canonical import canonical_form
from .compare import compare_output
from .errors import CodeTaskError
from .extract import code_blocks, extract_program
from .judge import (
    HARNESS_MODULE,
    HARNESS_SOURCE,
    Outcome,
    case_programs,
    compile_program,
    function_program,
    judge_cases,
    judge_compile,
    judge_function,
    python_syntax_error,
)
from .kappa import first_call, first_call_c, first_tool
from .names import KAPPA_FIRST_CALL, KAPPA_FIRST_TOOL, VERIFIER
from .task import LANGUAGES, CodeLimits, CodeTask, Comparison, IoCase, parse_compare

__all__ = [
    "CodeLimits",
    "CodeTask",
    "CodeTaskError",
    "Comparison",
    "HARNESS_MODULE",
    "HARNESS_SOURCE",
    "IoCase",
    "KAPPA_FIRST_CALL",
    "KAPPA_FIRST_TOOL",
    "LANGUAGES",
    "Outcome",
    "VERIFIER",
    "canonical_form",
    "case_programs",
    "code_blocks",
    "compare_output",
    "compile_program",
    "extract_program",
    "first_call",
    "first_call_c",
    "first_tool",
    "function_program",
    "judge_cases",
    "judge_compile",
    "judge_function",
    "parse_compare",
    "python_syntax_error",
]
