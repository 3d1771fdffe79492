"""Fair hand-out of scarce workers across requests, and cancellation of a request's work.

Example::

    from sandboxes.fair import CancelScope, FairQueue
    workers: FairQueue[str] = FairQueue()
    workers.put("w1")
    scope = CancelScope()
    w = workers.get("request-1", cancel=scope, timeout_s=5.0)   # "w1"
    undo = scope.on_cancel(lambda: print("kill", w))            # runs once, on cancel
    workers.put(w)
    undo()

A ``FairQueue`` holds idle resources (sandboxed workers, math processes) and the callers waiting
for one. Waiters are grouped by a *key* (one request); a freed resource goes to the key whose
turn it is, round-robin, and within a key to its oldest waiter. A batch of 40 checks therefore
takes one turn per round like a single check does: a small request waits at most one round of
the keys queued before it, never behind the whole batch. A waiter whose ``CancelScope`` is
cancelled leaves the queue at once (``CheckCancelledError``).

With ``reserve_s`` > 0 (``WarmPool`` sets it), one key never takes the *last* resource while
another key holds one, waits for one, or gave one back within ``reserve_s``: the last worker
stays free for the other tenant's next check, so a hostile batch whose every check runs to its
limit cannot make a trainer's single checks wait for it. A key alone still gets every worker.
A key may be a pair ``(group, request)``: the reserve is then kept between *groups* (certd's
principals: a user, a token), so one client's consecutive requests (a warm-up and a batch)
do not hold workers back from each other, while round-robin stays per request.
The caller reports which key gave a resource back (``release``), so holdings are known, and
may give the number of resources it keeps (``capacity``): one being replaced (a recycled
worker starting again) still counts, so the reserve holds while it starts. A resource given
back to be replaced (``release(key, replacing=True)``) stays charged to its group until the
replacement arrives (``put(item, owner=key)``): a tenant whose checks wreck their workers
waits for its own replacements and never takes the other tenant's worker meanwhile, and the
other tenant, holding nothing, takes its own at once.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from .errors import CheckCancelledError, SandboxBusyError

__all__ = ["CancelScope", "FairQueue"]

T = TypeVar("T")
_POLL_S = 0.1  # how soon a waiter notices its cancellation


class CancelScope:
    """One request's cancellation: a flag plus hooks that stop its running work.

    ``cancel`` may be called from any thread (a gRPC termination callback); hooks run in that
    thread, outside any lock, once each.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._hooks: dict[int, Callable[[], None]] = {}
        self._next = 0

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel`` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Mark cancelled and run every registered hook (idempotent)."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            hooks = list(self._hooks.values())
            self._hooks.clear()
        for hook in hooks:
            hook()

    def on_cancel(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Run ``hook`` on cancellation (now, when already cancelled).

        Returns:
            A function that unregisters the hook (a no-op once it ran).
        """
        with self._lock:
            if not self._cancelled:
                n = self._next
                self._next += 1
                self._hooks[n] = hook

                def undo() -> None:
                    with self._lock:
                        self._hooks.pop(n, None)

                return undo
        hook()
        return lambda: None


class _Waiter(Generic[T]):
    __slots__ = ("item",)

    def __init__(self) -> None:
        self.item: T | None = None


def _group(key: Hashable) -> Hashable:
    """The reserve's group of ``key``: the first of a ``(group, request)`` pair, else the key."""
    return key[0] if isinstance(key, tuple) and len(key) == 2 else key


class FairQueue(Generic[T]):
    """Idle resources and the callers waiting for them, served round-robin by key."""

    def __init__(self, reserve_s: float = 0.0, capacity: int = 0) -> None:
        self._capacity = capacity  # resources the owner keeps, counting those being replaced
        self._cond = threading.Condition()
        self._idle: deque[T] = deque()
        self._waiters: OrderedDict[Hashable, deque[_Waiter[T]]] = OrderedDict()
        self._waiting = 0
        self._closed = False
        self._reserve_s = reserve_s
        self._held: dict[Hashable, int] = {}  # resources out, by group (with reserve_s only)
        self._seen: dict[Hashable, float] = {}  # when a group last gave one back

    def put(self, item: T, owner: Hashable | None = None) -> bool:
        """Give a resource back: to the next key's oldest waiter, else to the idle set.

        Args:
            item: The resource.
            owner: The key whose ``release(key, replacing=True)`` this resource replaces: the
                charge kept on its group ends.

        Returns:
            False when the queue is closed (the caller disposes of the resource).
        """
        with self._cond:
            if owner is not None:
                self._uncharge(_group(owner))
            if self._closed:
                return False
            self._idle.append(item)
            self._dispatch()
            return True

    def release(self, key: Hashable, *, replacing: bool = False) -> None:
        """``key`` no longer holds the resource it took (given back or disposed of).

        Args:
            key: The key that took it.
            replacing: The resource is being replaced for this key: its group stays charged
                with it until the replacement is ``put`` with ``owner=key``.
        """
        if not self._reserve_s:
            return
        key = _group(key)
        with self._cond:
            if not replacing:
                self._uncharge(key)
            now = time.monotonic()
            self._seen[key] = now
            for k in [k for k, t in self._seen.items() if now - t > self._reserve_s]:
                del self._seen[k]
            self._dispatch()

    def _uncharge(self, group: Hashable) -> None:
        left = self._held.get(group, 0) - 1
        if left > 0:
            self._held[group] = left
        else:
            self._held.pop(group, None)

    def _may_take(self, key: Hashable) -> bool:
        """Whether ``key`` may take an idle resource now (the reserve rule)."""
        if not self._reserve_s:
            return True
        key = _group(key)
        present = sum(self._held.values()) + len(self._idle)
        # A replacement started early makes one more present for a while; it is not a spare.
        kept = min(present, self._capacity) if self._capacity else present
        if self._held.get(key, 0) + 1 < kept or max(self._capacity, present) < 2:
            return True  # it leaves one to the others (or there is only one in all)
        now = time.monotonic()
        others = any(k != key for k in self._held) or any(_group(k) != key for k in self._waiters)
        recent = any(k != key and now - t <= self._reserve_s for k, t in self._seen.items())
        return not (others or recent)

    def _take(self, key: Hashable) -> T:
        if self._reserve_s:
            group = _group(key)
            self._held[group] = self._held.get(group, 0) + 1
        return self._idle.popleft()

    def _dispatch(self) -> None:
        """Hand idle resources to waiters, round-robin over the keys that may take one."""
        while self._idle and self._waiters:
            key = next((k for k in self._waiters if self._may_take(k)), None)
            if key is None:
                return
            queue = self._waiters[key]
            waiter = queue.popleft()
            if queue:
                self._waiters.move_to_end(key)  # the key's next waiter has its turn later
            else:
                del self._waiters[key]
            self._waiting -= 1
            waiter.item = self._take(key)
            self._cond.notify_all()

    def get(
        self,
        key: Hashable,
        *,
        cancel: CancelScope | None = None,
        timeout_s: float | None = None,
        limit: int | None = None,
    ) -> T | None:
        """Take a resource, waiting for the key's turn.

        Args:
            key: The fairness group (one request), or ``(group, request)`` (see above).
            cancel: Leave the queue when this scope is cancelled.
            timeout_s: The longest wait; None waits for ever.
            limit: Waiters allowed at once; one more raises ``SandboxBusyError``.

        Returns:
            The resource, or None when ``timeout_s`` passed first.

        Raises:
            CheckCancelledError: ``cancel`` was cancelled (before or while waiting).
            SandboxBusyError: The queue is closed, or ``limit`` waiters are already queued.
        """
        with self._cond:
            if cancel is not None and cancel.cancelled:
                raise CheckCancelledError("the request was cancelled")
            if self._closed:
                raise SandboxBusyError("the pool is closed")
            if self._idle and not self._waiters and self._may_take(key):
                return self._take(key)
            if limit is not None and self._waiting >= limit:
                raise SandboxBusyError(f"{self._waiting} checks already queued")
            waiter: _Waiter[T] = _Waiter()
            self._waiters.setdefault(key, deque()).append(waiter)
            self._waiting += 1
            # An idle resource the waiters ahead may not take (the reserve rule) may be this
            # key's: hand it over now, not at the next poll.
            self._dispatch()
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            while waiter.item is None:
                gone = cancel is not None and cancel.cancelled
                left = None if deadline is None else deadline - time.monotonic()
                if gone or self._closed or (left is not None and left <= 0):
                    self._leave(key, waiter)
                    if gone:
                        raise CheckCancelledError("the request was cancelled")
                    if self._closed:
                        raise SandboxBusyError("the pool is closed")
                    return None
                wait = _POLL_S if cancel is not None or self._reserve_s else None
                if left is not None:
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)
                self._dispatch()  # a reserve may have lapsed
            return waiter.item

    def _leave(self, key: Hashable, waiter: _Waiter[T]) -> None:
        queue = self._waiters.get(key)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            self._waiting -= 1
            if not queue:
                del self._waiters[key]

    def remove(self, item: T) -> bool:
        """Take ``item`` out of the idle set; False when it is not idle (in use, or gone)."""
        with self._cond:
            for i, idle in enumerate(self._idle):
                if idle is item:
                    del self._idle[i]
                    return True
            return False

    def take_idle(self) -> list[T]:
        """Take every idle resource now (to inspect them); the queue stays open."""
        with self._cond:
            idle = list(self._idle)
            self._idle.clear()
            return idle

    def drain(self) -> list[T]:
        """Close the queue: wake every waiter and return the idle resources."""
        with self._cond:
            self._closed = True
            idle = list(self._idle)
            self._idle.clear()
            self._cond.notify_all()
            return idle

    @property
    def idle(self) -> int:
        """Resources ready now."""
        return len(self._idle)

    @property
    def waiting(self) -> int:
        """Callers queued now."""
        return self._waiting

    def keys_waiting(self) -> int:
        """Distinct keys with a waiter now."""
        with self._cond:
            return len(self._waiters)
