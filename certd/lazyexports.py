"""A package's public names imported on first use (PEP 562), from a table of their modules.

Example::

    # in certd/kappa/__init__.py
    __getattr__ = lazy_exports(__name__, {"learned": ("LearnedKappa",), "steps": ("first_step",)})

``certd.kappa.LearnedKappa`` then imports ``certd.kappa.learned`` the first time it is read, and
keeps the value in the package; importing the package loads none of them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name in ``where[module]`` comes from
    ``package.module``; any other name is an AttributeError."""
    module_of = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
