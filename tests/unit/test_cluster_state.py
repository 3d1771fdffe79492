"""Cluster state in a real Redis: canonical-solution reservations across replicas."""

from __future__ import annotations

import pytest

from certd.ledger.redis_store import RedisStore
from certd.service.cluster import RedisCanonicals

pytest.importorskip("redis")


def test_reservations_block_other_labels_until_stale(
    redis_server: object, redis_prefix: str
) -> None:
    store = RedisStore(redis_server.url, prefix=redis_prefix)  # type: ignore[attr-defined]
    fresh = RedisCanonicals(store.client, store.key_prefix, stale_s=3600)
    stale = RedisCanonicals(store.client, store.key_prefix, stale_s=0)
    assert fresh.reserve("t", "k", "c1", "25,-") is None
    assert fresh.reserve("t", "k", "c1", "25,-") is None  # same label: idempotent
    assert fresh.reserve("t", "k", "c1", "3,+") == "25,-"  # in flight elsewhere
    assert fresh.reserve("t", "k", "c2", "3,+") is None  # another solution is free
    # A reservation whose certificate never landed is taken over once stale ...
    assert stale.reserve("t", "k", "c1", "3,+") is None
    assert fresh.reserve("t", "k", "c1", "25,-") == "3,+"
    # ... but never one whose certificate is in the ledger.
    store.append([("feasibility/t/k/3,+", b"cert")])
    assert stale.reserve("t", "k", "c1", "25,-") == "3,+"
    # Release drops only the releasing label's reservation.
    fresh.release("t", "k", "c2", "25,-")
    assert fresh.reserve("t", "k", "c2", "25,-") == "3,+"
    fresh.release("t", "k", "c2", "3,+")
    assert fresh.reserve("t", "k", "c2", "25,-") is None
    store.close()
