"""grpc's health service with the two guards a hostile client needs: auth and a watch bound.

Example::

    health = GuardedHealth(max_watches=64, authenticate=access.authenticate)
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    health.set("certd.v1.Verifier", health_pb2.HealthCheckResponse.SERVING)

``Check`` is grpc's own: a lookup, open to anyone, never counted against the RPC bound. ``Watch``
stays non-blocking (it holds no serving thread while it waits, so watchers can never starve
other calls), but it holds a stream: with access control on it needs an authenticated caller,
and at most ``max_watches`` are open at once; one more gets RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc
from grpc_health.v1 import health

from certd.errors import AuthenticationError

__all__ = ["GuardedHealth"]


class GuardedHealth(health.HealthServicer):
    """The health servicer with authenticated, bounded watches.

    Args:
        max_watches: Watch streams open at once.
        authenticate: raises ``AuthenticationError`` for a caller without credentials; None
            when access control is off.
    """

    def __init__(
        self,
        max_watches: int,
        authenticate: Callable[[grpc.ServicerContext], object] | None = None,
    ) -> None:
        super().__init__(experimental_non_blocking=True)
        self._max_watches = max_watches
        self._authenticate = authenticate
        self._watch_lock = threading.Lock()
        self._watches = 0

    @property
    def watches(self) -> int:
        """Watch streams open now."""
        return self._watches

    def _release(self) -> None:
        with self._watch_lock:
            self._watches -= 1

    def Watch(
        self,
        request: Any,
        context: grpc.ServicerContext,
        send_response_callback: Callable[[Any], None] | None = None,
    ) -> Any:
        """grpc's Watch, after authentication and within the watch bound."""
        if self._authenticate is not None:
            try:
                self._authenticate(context)
            except AuthenticationError as e:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, str(e))
        with self._watch_lock:
            if self._watches >= self._max_watches:
                busy = True
            else:
                busy = False
                self._watches += 1
        if busy:
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{self._max_watches} health watches already open (max_health_watches)",
            )
        if not context.add_callback(self._release):
            self._release()
        return super().Watch(request, context, send_response_callback)
