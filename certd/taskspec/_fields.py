"""Field readers of task objects: each error names the field (``task.<key>: …``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["int_field", "only_fields", "str_field"]


def only_fields(obj: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    """Refuse a field the object does not define, never drop it (docs/formats.md §0)."""
    extra = sorted(str(k) for k in obj if k not in allowed)
    if extra:
        raise ValueError(f"{where}: unknown field(s) {extra}; expected only {sorted(allowed)}")


def int_field(obj: Mapping[str, Any], key: str) -> int:
    """``obj[key]`` as an integer (not a bool)."""
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"task.{key}: expected an integer, got {value!r}")
    return value


def str_field(obj: Mapping[str, Any], key: str) -> str:
    """``obj[key]`` as a string ("" when absent)."""
    value = obj.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f"task.{key}: expected a string, got {value!r}")
    return value
