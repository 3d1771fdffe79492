"""The runnable examples in the certd.ledger module docstrings run and pass."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "certd.ledger",
    "certd.ledger.audit",
    "certd.ledger.checkpoint",
    "certd.ledger.log",
    "certd.ledger.merkle",
    "certd.ledger.sqlite",
    "certd.ledger.store",
    "certd.ledger.witness",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__ and ">>>" in module.__doc__, f"{name} has no runnable example"
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest failures in {name}"
