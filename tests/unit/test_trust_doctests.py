"""The runnable examples of the trust path's modules run and pass (issue 16).

The literal ``Example::`` blocks that need a server (``forkgate.ratchet``,
``forkgate.checkpoint_ratchet``, ``forkgate.acceptance``) run verbatim in
tests/integration/test_promotion_trust.py.
"""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "certd.atomicfile",
    "certd.exitcodes",
    "certd.opening",
    "certd.statements",
    "certd.ledger.audit",
    "forkgate.ratchet_state",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__ and ">>>" in module.__doc__, f"{name} has no runnable example"
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest failures in {name}"
