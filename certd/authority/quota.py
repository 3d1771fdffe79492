"""Per-principal quotas on ledger growth: entries per hour and bytes per day.

Example:
    >>> now = [0.0]
    >>> quota = LedgerQuota(entries_per_hour=2, bytes_per_day=10_000, clock=lambda: now[0])
    >>> quota.admit("alice"); quota.charge("alice", entries=2, nbytes=6_400)
    >>> try:
    ...     quota.admit("alice")
    ... except QuotaExceededError as e:
    ...     print(str(e).split(";")[0])
    ledger quota: principal 'alice' wrote 2 entries in the last hour (at most 2)
    >>> now[0] = 3_601.0
    >>> quota.admit("alice")  # the hour has passed

Every receipt (Verify*) and every new certificate (Certify*) is one ledger entry written on
behalf of the principal that asked (``certd.service.access.client_of``). ``admit`` runs
before the work and refuses a principal already at a limit (``QuotaExceededError``, gRPC
RESOURCE_EXHAUSTED with a RetryInfo of when the window frees room); ``charge`` records what
the request wrote. A request admitted under a limit completes, so a principal can pass a
limit by at most one request's entries. Windows slide in steps: per minute for the hour,
per hour for the day. The counts are this process's: each replica of a cluster keeps its
own, so a principal spread over N replicas may write up to N times the limits. No I/O here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from certd.config import ServiceLimits
from certd.errors import RateLimitedError

__all__ = ["LedgerQuota", "QuotaExceededError"]

_MINUTE = 60.0
_HOUR = 3_600.0


class QuotaExceededError(RateLimitedError):
    """A principal is at its quota of ledger growth (gRPC RESOURCE_EXHAUSTED)."""


@dataclass
class _Usage:
    """One principal's writes: entries per minute (last hour), bytes per hour (last day)."""

    entries: dict[int, int] = field(default_factory=dict)
    nbytes: dict[int, int] = field(default_factory=dict)

    def prune(self, minute: int, hour: int) -> None:
        for m in [m for m in self.entries if m <= minute - 60]:
            del self.entries[m]
        for h in [h for h in self.nbytes if h <= hour - 24]:
            del self.nbytes[h]


class LedgerQuota:
    """Per-principal limits on ledger entries per hour and bytes per day (0 disables one)."""

    def __init__(
        self,
        *,
        entries_per_hour: int,
        bytes_per_day: int,
        clock: Callable[[], float] = time.time,
        max_principals: int = 100_000,
    ) -> None:
        """Set the limits.

        Args:
            entries_per_hour: most ledger entries a principal writes in any hour; 0: no limit.
            bytes_per_day: most ledger bytes a principal writes in any 24 hours; 0: no limit.
            clock: seconds since the epoch.
            max_principals: principals tracked; past it, idle ones are forgotten first.
        """
        self.entries_per_hour = entries_per_hour
        self.bytes_per_day = bytes_per_day
        self._clock = clock
        self._max_principals = max_principals
        self._usage: dict[str, _Usage] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, limits: ServiceLimits) -> LedgerQuota:
        """The quota ``limits.ledger_entries_per_hour`` and ``ledger_bytes_per_day`` set."""
        return cls(
            entries_per_hour=limits.ledger_entries_per_hour,
            bytes_per_day=limits.ledger_bytes_per_day,
        )

    @property
    def enabled(self) -> bool:
        """Whether any limit is set."""
        return self.entries_per_hour > 0 or self.bytes_per_day > 0

    def admit(self, principal: str) -> None:
        """Refuse a principal already at a limit.

        Args:
            principal: who asks.

        Raises:
            QuotaExceededError: the principal's writes in the window reached a limit.
        """
        if not self.enabled:
            return
        now = self._clock()
        minute, hour = int(now // _MINUTE), int(now // _HOUR)
        with self._lock:
            usage = self._usage.get(principal)
            if usage is None:
                return
            usage.prune(minute, hour)
            entries = sum(usage.entries.values())
            nbytes = sum(usage.nbytes.values())
            if self.entries_per_hour and entries >= self.entries_per_hour:
                first = min(usage.entries)
                wait = (first + 60) * _MINUTE - now
                raise QuotaExceededError(
                    f"ledger quota: principal {principal!r} wrote {entries} entries in the last "
                    f"hour (at most {self.entries_per_hour}); retry in {wait:.0f} s",
                    retry_after_s=max(wait, 1.0),
                )
            if self.bytes_per_day and nbytes >= self.bytes_per_day:
                first = min(usage.nbytes)
                wait = (first + 24) * _HOUR - now
                raise QuotaExceededError(
                    f"ledger quota: principal {principal!r} wrote {nbytes} bytes in the last "
                    f"24 hours (at most {self.bytes_per_day}); retry in {wait:.0f} s",
                    retry_after_s=max(wait, 1.0),
                )

    def charge(self, principal: str, *, entries: int, nbytes: int) -> None:
        """Record ledger writes made for a principal.

        Args:
            principal: who asked.
            entries: entries written.
            nbytes: their bytes.
        """
        if not self.enabled or (entries <= 0 and nbytes <= 0):
            return
        now = self._clock()
        minute, hour = int(now // _MINUTE), int(now // _HOUR)
        with self._lock:
            usage = self._usage.get(principal)
            if usage is None:
                if len(self._usage) >= self._max_principals:
                    self._forget_idle(minute, hour)
                usage = self._usage[principal] = _Usage()
            usage.entries[minute] = usage.entries.get(minute, 0) + entries
            usage.nbytes[hour] = usage.nbytes.get(hour, 0) + nbytes

    def _forget_idle(self, minute: int, hour: int) -> None:
        """Drop principals with nothing left in their windows, else the oldest tracked half."""
        for name in list(self._usage):
            usage = self._usage[name]
            usage.prune(minute, hour)
            if not usage.entries and not usage.nbytes:
                del self._usage[name]
        if len(self._usage) >= self._max_principals:
            for name in list(self._usage)[: len(self._usage) // 2]:
                del self._usage[name]
