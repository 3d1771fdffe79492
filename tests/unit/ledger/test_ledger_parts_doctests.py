"""The runnable examples of the ledger's parts (split out of ``certd.ledger.log``) pass."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "certd.ledger.checkpointer",
    "certd.ledger.proofs",
    "certd.ledger.store",
    "certd.ledger.store.interface",
    "certd.ledger.store.reads",
    "certd.ledger.store.factory",
    "certd.ledger.store.sqlite",
]


@pytest.mark.parametrize("name", MODULES)
def test_module_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__ and ">>>" in module.__doc__, f"{name} has no runnable example"
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
