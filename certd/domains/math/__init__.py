"""The math domain: extract, parse, compare and label math answers (pure code).

Example:
    >>> from certd.domains.math import MathTask, verify_math
    >>> v = verify_math(MathTask(gold=r"\\frac{1}{2}"), r"Let's see. \\boxed{0.5}")
    >>> v.status.name, v.family.label
    ('CORRECT', 'step-by-step')

Parsing goes through ``latex2sympy2_extended`` (never ``eval`` or ``sympy.parse_expr`` on
model text); every answer is checked against ``MathLimits`` before SymPy sees it. The hard
deadline and memory cap are the worker pool's job (``certd.authority.mathpool``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from certd.lazyexports import lazy_exports

if TYPE_CHECKING:
    from .equiv import equivalent, values_equal
    from .errors import MathError, MathLimitError, MathUnparsedError
    from .extract import SOURCES, ExtractConfig, Extracted, all_boxed, extract_answer
    from .limits import MathLimits
    from .names import KAPPA_FIRST_STEP, KAPPA_ROUTE, VERIFIER
    from .parse import Parsed, parse_answer
    from .route import ROUTES, kappa_route, route_of
    from .shaping import MathShaping
    from .task import MathTask
    from .verify import parse_gold, verify_math

# Each public name's module, imported on first use (PEP 562): the domain's spec and task are
# plain data, and loading the package must not load SymPy (a certd with math disabled).
_WHERE = {
    "equiv": ("equivalent", "values_equal"),
    "errors": ("MathError", "MathLimitError", "MathUnparsedError"),
    "extract": ("SOURCES", "ExtractConfig", "Extracted", "all_boxed", "extract_answer"),
    "limits": ("MathLimits",),
    "names": ("KAPPA_FIRST_STEP", "KAPPA_ROUTE", "VERIFIER"),
    "parse": ("Parsed", "parse_answer"),
    "route": ("ROUTES", "kappa_route", "route_of"),
    "task": ("MathTask",),
    "shaping": ("MathShaping",),
    "verify": ("parse_gold", "verify_math"),
}
__getattr__ = lazy_exports(__name__, _WHERE)


# Plain sorted() order, which tests/unit/test_packaging.py checks.
__all__ = [
    "ExtractConfig",
    "Extracted",
    "KAPPA_FIRST_STEP",
    "KAPPA_ROUTE",
    "MathError",
    "MathLimitError",
    "MathLimits",
    "MathShaping",
    "MathTask",
    "MathUnparsedError",
    "Parsed",
    "ROUTES",
    "SOURCES",
    "VERIFIER",
    "all_boxed",
    "equivalent",
    "extract_answer",
    "kappa_route",
    "parse_answer",
    "parse_gold",
    "route_of",
    "values_equal",
    "verify_math",
]
