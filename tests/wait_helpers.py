"""Waiting in tests: poll a condition instead of sleeping a guessed time.

Example::

    from wait_helpers import wait_until

    pid = wait_until(lambda: pool.worker_pids(), timeout=10, what="a live worker")

A bare ``time.sleep(n)`` that waits for something to happen is either too short on a loaded
machine (a flaky test) or too long on an idle one (a slow suite); ``wait_until`` returns as
soon as the condition holds and fails with what it waited for when it does not. Sleeps that
*are* the thing tested (a deadline passing, a client retrying while nothing listens) stay
``time.sleep`` with a comment saying so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.02,
    what: str = "the condition",
) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a truthy value.

    Args:
        predicate: the condition; its truthy result is returned.
        timeout: seconds to wait before failing.
        interval: seconds between calls (the first call is immediate).
        what: what is awaited, for the failure message.

    Returns:
        The predicate's first truthy result.

    Raises:
        AssertionError: the predicate stayed falsy for ``timeout`` seconds (its last
            result is in the message).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g}s for {what}; last result: {result!r}")
        time.sleep(interval)
