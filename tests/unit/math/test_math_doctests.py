"""The math modules' docstring examples run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "certd.domains.kappa_report",
    "certd.domains.math",
    "certd.domains.math.equiv",
    "certd.domains.math.errors",
    "certd.domains.math.extract",
    "certd.domains.math.fastlatex",
    "certd.domains.math.fastlatex._atoms",
    "certd.domains.math.fastlatex._build",
    "certd.domains.math.fastlatex._expr",
    "certd.domains.math.fastlatex._lexer",
    "certd.domains.math.fastlatex._top",
    "certd.domains.math.first_step",
    "certd.domains.math.limits",
    "certd.domains.math.names",
    "certd.domains.math.parse",
    "certd.domains.math.route",
    "certd.domains.math.task",
    "certd.domains.math.verify",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest failures in {name}"
