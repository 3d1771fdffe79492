"""The public surface: sorted __all__, runnable module examples, no forbidden imports."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import certd.domains.countdown as countdown

MODULES = sorted(
    f"certd.domains.countdown.{m.name}" for m in pkgutil.iter_modules(countdown.__path__)
)
PACKAGE_DIR = Path(countdown.__file__).parent


def test_all_is_sorted_and_complete() -> None:
    assert countdown.__all__ == sorted(countdown.__all__)
    for name in countdown.__all__:
        assert hasattr(countdown, name), name
    required = {
        "VERIFIER", "KAPPA", "CountdownRules", "RewardShaping", "CountdownLimits",
        "CountdownTask", "parse_expression", "evaluate", "extract_answer", "verify_countdown",
        "kappa_first_op", "initiated_entry", "canonical_form", "labels_of",
        "enumerate_families", "Enumeration", "LabelWitness", "CountdownSyntaxError",
        "CountdownRuleError", "Expr",
    }  # fmt: skip
    assert required <= set(countdown.__all__)


@pytest.mark.parametrize("name", ["certd.domains.countdown", *MODULES])
def test_module_docstring_opens_with_a_runnable_example(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__ is not None
    assert "Example:" in module.__doc__.split("\n\n")[1]
    assert ">>>" in module.__doc__  # run by tests/unit/test_doctests.py


@pytest.mark.parametrize("path", sorted(PACKAGE_DIR.glob("*.py")), ids=lambda p: p.name)
def test_domain_code_stays_pure(path: Path) -> None:
    tree = ast.parse(path.read_text())
    banned_modules = {"os", "sys", "subprocess", "socket", "logging", "grpc", "sympy", "io"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not {a.name.split(".")[0] for a in node.names} & banned_modules
        elif isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] not in banned_modules
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in {"eval", "exec", "compile", "open", "__import__"}
