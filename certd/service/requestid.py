"""The id of the RPC a thread is serving, as a context variable (no gRPC, no metrics).

Example:
    >>> from certd.service.requestid import REQUEST_ID, current_request_id
    >>> token = REQUEST_ID.set("abc123")
    >>> current_request_id()
    'abc123'
    >>> REQUEST_ID.reset(token)

The observability interceptor sets it for each RPC; the handlers key the RPC's job by it and the
logs carry it. It lives apart from both so neither imports the other for it.
"""

from __future__ import annotations

import contextvars

__all__ = ["REQUEST_ID", "current_request_id"]

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "certd_request_id", default=None
)
"""The serving RPC's request id (``certd_request_id``; the code checker's logs read it by name)."""


def current_request_id() -> str | None:
    """The id of the RPC this thread is serving, or None.

    Returns:
        The request id.
    """
    return REQUEST_ID.get()
