"""Start-up indexing from keys: both stores list keyed entries without reading the others, and
the certificate index built that way equals the one a full scan builds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from certd.ledger.certindex import CertificateIndex
from certd.ledger.log import Ledger
from certd.ledger.store import KEY_SEPARATOR, LedgerStore
from certd.ledger.store.redis import RedisStore
from certd.ledger.store.sqlite import SQLiteStore
from certd.signing.keys import SigningKey

ORIGIN = "forkgate.test/keyed"


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    if request.param == "sqlite":
        s: LedgerStore = SQLiteStore(tmp_path / "ledger.db")
    else:
        server: Any = request.getfixturevalue("redis_server")
        s = RedisStore(server.url, prefix=request.getfixturevalue("redis_prefix"))
    yield s
    s.close()


def test_keyed_lists_only_entries_under_the_prefix(store: LedgerStore) -> None:
    store.append([(None, b"receipt"), ("feasibility/a/k/1", b"c1"), ("other/x", b"o")])
    joined = "feasibility/b/k/2" + KEY_SEPARATOR + "canonical/b/k/zz"
    store.append([(joined, b"c2"), ("feasibility/*[?/k/3", b"c3")])  # glob characters
    assert store.keyed("feasibility/", store.size()) == [1, 3, 4]
    assert store.keyed("feasibility/", 4) == [1, 3]
    assert store.keyed("feasibility/*[?", 10) == [4]
    assert store.keyed("nothing/", 10) == []
    assert store.entries_at([4, 1]) == [b"c3", b"c1"]


def test_the_index_from_keys_equals_the_full_scan(tmp_path: Path) -> None:
    from certd.authority.checker import Checkers
    from certd.authority.feasibility import Authority, CheckedTask
    from certd.config import CertdConfig, CountdownConfig
    from certd.service.convert import checked_task
    from forkgate._base import certify_request
    from forkgate.puzzles import countdown_puzzles

    key = SigningKey.generate(ORIGIN)
    cfg = CertdConfig(countdown=CountdownConfig(verify_workers=0))
    ledger = Ledger(SQLiteStore(tmp_path / "l.db"), key, ORIGIN)
    authority = Authority(Checkers(cfg), ledger, key)
    from certd.domains import countdown as cd

    for p in countdown_puzzles(6, seed=3):
        found = cd.enumerate_families(cd.CountdownTask(tuple(p["numbers"]), p["target"]))
        for fam in found.families[:2]:
            lw = found.labels[fam[0]]
            r = certify_request(p, f"{lw.operand},{lw.operator}", lw.witness)
            task: CheckedTask = checked_task(r.task, cfg, "task")
            authority.certify(task, "countdown.first-op.v1", r.label.value, r.witness)
        ledger.append([(None, b"a receipt, never read at start-up")])
    keyed = CertificateIndex(ledger)

    class NoKeys:  # the same ledger seen through a store that cannot list keys
        def __getattr__(self, name: str) -> Any:
            return getattr(ledger, name)

        @property
        def store(self) -> Any:
            s = ledger.store

            class S:
                def __getattr__(self, name: str) -> Any:
                    return getattr(s, name)

                def keyed(self, prefix: str, below: int) -> None:
                    return None

            return S()

    scanned = CertificateIndex(NoKeys())  # type: ignore[arg-type]  # a duck-typed ledger
    assert keyed._by_task == scanned._by_task and keyed._by_id == scanned._by_id
    assert len(keyed._by_id) >= 6
    ledger.close()
