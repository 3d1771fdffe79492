"""Acceptance decisions in the ledger: the keys they are appended under, and reading them back.

Example:
    >>> acceptance_key("run-1", 3)
    'acceptance/run-1/3'
    >>> refusal_key("run-1", "9f2c")
    'acceptance-refusal/run-1/9f2c'
    >>> refusal_key("run-1", "9f2c").startswith(ACCEPTANCE_PREFIX)
    True

An accepted checkpoint is appended under ``acceptance/<run>/<sequence>``: the store's unique keys
make a second certificate for the same place in a run's chain impossible. A refusal record is
appended under ``acceptance-refusal/<run>/<evaluation id>``. Both keys start with
``ACCEPTANCE_PREFIX``, so a reader lists every decision without reading the other entries
(``decision_entries``). Every ledger written so far holds these strings: they never change.
What a decision is, and how its entry is signed and parsed, is the authority's
(``certd.authority.acceptance_records``); the keys are built here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from certd.ledger.log import Ledger

__all__ = ["ACCEPTANCE_PREFIX", "acceptance_key", "decision_entries", "refusal_key"]

ACCEPTANCE_PREFIX = "acceptance"
"""The prefix of both decision keys (``acceptance/`` and ``acceptance-refusal/``)."""

_SCAN_CHUNK = 4096


def acceptance_key(run: str, sequence: int) -> str:
    """The ledger key of a run's accepted certificate at ``sequence`` in its chain."""
    return f"{ACCEPTANCE_PREFIX}/{run}/{sequence}"


def refusal_key(run: str, evaluation_id: str) -> str:
    """The ledger key of the signed refusal record of an evaluation."""
    return f"{ACCEPTANCE_PREFIX}-refusal/{run}/{evaluation_id}"


def decision_entries(ledger: Ledger, start: int, size: int) -> Iterator[tuple[int, bytes]]:
    """(index, entry) of the entries below ``size`` that may be decisions, from ``start`` on.

    From the beginning (``start`` 0), on a store that lists keys, only the entries appended
    under a decision key are read; otherwise every entry from ``start`` (a shared ledger's
    catch-up reads what other replicas appended, whatever its key). The caller parses them.

    Raises:
        StoreError: the store failed.
    """
    keyed = ledger.store.keyed(ACCEPTANCE_PREFIX, size) if start == 0 else None
    if keyed is not None:
        for at in range(0, len(keyed), _SCAN_CHUNK):
            chunk = keyed[at : at + _SCAN_CHUNK]
            yield from zip(chunk, ledger.store.entries_at(chunk), strict=True)
        return
    for at in range(start, size, _SCAN_CHUNK):
        yield from enumerate(ledger.entries(at, min(size, at + _SCAN_CHUNK)), start=at)
