"""The ledger keys of recorded κ models, and reading a recorded model back (no I/O).

Example:
    >>> model_key("ab12", "math.first-step.v1")
    'kappa-model/ab12/math.first-step.v1'
    >>> parse_model_entry(b"not an envelope") is None
    True

The operator's ``certd kappa fit`` records at most one model per (task, κ) under
``model_key``; the learned labeller finds it there (``certd.authority.labeller``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from certd.opening import PREDICATE_KAPPA_MODEL

__all__ = ["model_key", "parse_model_entry"]

_PREFIX = "kappa-model/"


def model_key(task_digest: str, kappa: str) -> str:
    """The ledger key of the recorded model of (task, κ): at most one per pair."""
    return f"{_PREFIX}{task_digest}/{kappa}"


def parse_model_entry(entry: bytes) -> Mapping[str, Any] | None:
    """The predicate of a kappa-model ledger entry (certd's own ledger: the signature is
    ``certd audit``'s to check), or None when the entry is of another kind."""
    try:
        env = json.loads(entry)
        st = json.loads(base64.b64decode(env["payload"]))
        if st.get("predicateType") != PREDICATE_KAPPA_MODEL:
            return None
        predicate = st["predicate"]
        return predicate if isinstance(predicate, dict) else None
    except (ValueError, KeyError, TypeError):
        return None
