"""Per-principal ledger quotas: entries per hour, bytes per day, windows that slide."""

from __future__ import annotations

import pytest

from certd.authority.quota import LedgerQuota, QuotaExceededError
from certd.errors import LimitExceededError


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_entries_per_hour_refuse_then_free_as_the_hour_slides() -> None:
    clock = Clock()
    quota = LedgerQuota(entries_per_hour=3, bytes_per_day=0, clock=clock)
    for _ in range(3):
        quota.admit("alice")
        quota.charge("alice", entries=1, nbytes=3_000)
    with pytest.raises(QuotaExceededError, match="3 entries in the last hour") as got:
        quota.admit("alice")
    assert isinstance(got.value, LimitExceededError)  # RESOURCE_EXHAUSTED on the wire
    assert 0 < got.value.retry_after_s <= 3_600
    quota.admit("bob")  # another principal has its own count
    clock.now += 3_600 + 60
    quota.admit("alice")


def test_bytes_per_day_refuse_for_a_day() -> None:
    clock = Clock()
    quota = LedgerQuota(entries_per_hour=0, bytes_per_day=10_000, clock=clock)
    quota.charge("alice", entries=1, nbytes=6_000)
    quota.admit("alice")
    quota.charge("alice", entries=1, nbytes=6_000)  # admitted under the limit: completes
    with pytest.raises(QuotaExceededError, match="12000 bytes in the last 24 hours"):
        quota.admit("alice")
    clock.now += 23 * 3_600
    with pytest.raises(QuotaExceededError):
        quota.admit("alice")
    clock.now += 2 * 3_600
    quota.admit("alice")


def test_zero_disables_and_idle_principals_are_forgotten() -> None:
    clock = Clock()
    off = LedgerQuota(entries_per_hour=0, bytes_per_day=0, clock=clock)
    off.charge("a", entries=10**9, nbytes=10**12)
    off.admit("a")
    small = LedgerQuota(entries_per_hour=5, bytes_per_day=0, clock=clock, max_principals=4)
    for i in range(20):
        small.charge(f"p{i}", entries=1, nbytes=1)
    assert len(small._usage) <= 4
