"""A store that does not answer for a moment is not a fork: the append fails, the ledger goes on.

The fault test (kill -9 of Redis mid-load) found replicas that stopped for good after a Redis
restart: a read error while re-checking the root was taken as a consistency failure. Here a
store whose root read fails once (a stand-in for the connection refused of a restarting
Redis: the real restart is in tests/integration/test_cluster_faults.py) must fail that one
append with StoreError, sign nothing, and take the next append.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from certd.errors import ConsistencyError, StoreError
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.signing.keys import SigningKey

ORIGIN = "certd.example/log"
KEY = SigningKey(ORIGIN, bytes(range(32)))


class FlakyRoot(SQLiteStore):
    """Fails ``root`` while ``down`` is set, as a backend that cannot be reached."""

    down = False

    def root(self, size: int) -> bytes:
        if self.down:
            raise StoreError("cannot read 5 nodes: Error 111 connecting: Connection refused")
        return super().root(size)


def test_a_root_read_error_fails_one_append_and_stops_nothing(tmp_path: Path) -> None:
    store = FlakyRoot(tmp_path / "l.db")
    with Ledger(store, KEY, ORIGIN) as ledger:
        ledger.append([(None, b"a")])
        signed = ledger.checkpoint()
        store.down = True
        with pytest.raises(StoreError, match="Connection refused"):
            ledger.append([(None, b"b")])
        assert ledger.checkpoint() == signed  # nothing signed while the store was down
        assert ledger.health() is None  # not fail-stop
        store.down = False
        assert ledger.append([(None, b"c")]) == [1]
        assert ledger.checkpoint().checkpoint.size == 2


def test_a_root_that_differs_still_stops_the_ledger(tmp_path: Path) -> None:
    """The other side: evidence of a fork (a different root) is still fail-stop."""
    store = FlakyRoot(tmp_path / "l.db")
    with Ledger(store, KEY, ORIGIN) as ledger:
        ledger.append([(None, b"a"), (None, b"b")])
        store.root = lambda size: b"\x01" * 32  # type: ignore[method-assign]  # a forged tree
        with pytest.raises(ConsistencyError, match="expected the stored root at size 2"):
            ledger.append([(None, b"c")])
        assert ledger.health() is not None and "stopped" in (ledger.health() or "")
