"""Every math limit is configurable and enforced: no limit documented and never read."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from certd.config import MathConfig
from certd.domains.math.limits import MathLimits

ROOT = Path(__file__).resolve().parents[3]


def _sources() -> str:
    files = [p for p in (ROOT / "certd").rglob("*.py") if p.name != "limits.py"]
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


def test_each_limit_is_a_config_field() -> None:
    names = {f.name for f in dataclasses.fields(MathLimits)}
    assert names <= set(MathConfig.model_fields), names - set(MathConfig.model_fields)


def test_each_limit_is_read_where_it_is_enforced() -> None:
    text = _sources()
    for field in dataclasses.fields(MathLimits):
        # Read as an attribute (``limits.max_fracs``), not just passed on (``max_fracs=cfg.…``).
        reads = re.findall(rf"\b(?!cfg\b)\w+\.{field.name}\b", text)
        assert reads, f"MathLimits.{field.name} is never enforced"
