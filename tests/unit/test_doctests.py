"""Every runnable docstring example in certd, sandboxes and forkgate runs and passes.

One runner for the whole tree: a module whose source holds a ``>>>`` example is found here,
so a new example is tested without being listed. Literal ``Example::`` blocks that need a
server run verbatim in the integration tests that name them (e.g.
tests/integration/test_promotion_trust.py).
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"certd": "certd", "sandboxes": "sandboxes", "forkgate": "client"}
# Modules whose examples are covered elsewhere and need more than a unit test may start.
SKIP: dict[str, str] = {}


def _modules() -> list[str]:
    names = []
    for package, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if ">>>" not in path.read_text(encoding="utf-8"):
                continue
            parts = [package, *path.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            names.append(".".join(parts))
    return names


MODULES = _modules()


def test_the_tree_has_examples() -> None:
    """The discovery found the packages (a path mistake would silently test nothing)."""
    assert {"certd.signing.dsse", "certd.ledger.log", "forkgate.advantages"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    if name in SKIP:
        pytest.skip(SKIP[name])
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name}: no example ran"
    assert result.failed == 0, f"{result.failed} doctest failures in {name}"
