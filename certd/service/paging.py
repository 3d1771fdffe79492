"""Pagination of list RPCs (Google AIP-158): ``page_size``, ``page_token``, ``next_page_token``.

Example::

    size = page_size(request.page_size, cfg.limits)              # 0 -> default, cap at max
    after = read_token(request.page_token, query="run-7")        # None on the first page
    page = [d for d in decisions if after is None or d.index > int(after)][:size]
    next_token = make_token("run-7", str(page[-1].index)) if more else ""

Tokens are keyset cursors: the key of the last item returned (a label, a ledger index), so
items added meanwhile never shift a page. A token is opaque to clients (base64url of a small
JSON object) and bound to the query it came from: reused with another run or task it is
refused. It carries nothing secret and grants nothing: a forged token only skips items the
caller may list anyway.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass

from certd.config import ServiceLimits
from certd.errors import InvalidInputError

__all__ = ["PageToken", "check_token", "make_token", "open_token", "page_size", "read_token"]

_MAX_TOKEN_CHARS = 4096


def page_size(requested: int, limits: ServiceLimits) -> int:
    """The page size to serve.

    Args:
        requested: the request's ``page_size`` (0: unset).
        limits: the service limits (default and maximum page size).

    Raises:
        InvalidInputError: a negative size.

    Returns:
        The default for 0, the maximum for anything above it, else the size asked for.
    """
    if requested < 0:
        raise InvalidInputError(
            f"page_size: expected 0 or more, got {requested}", field="page_size"
        )
    if requested == 0:
        return min(limits.default_page_size, limits.max_page_size)
    return min(requested, limits.max_page_size)


def _bind(query: str) -> str:
    return hashlib.sha256(query.encode()).hexdigest()[:16]


def make_token(query: str, after: str) -> str:
    """The token of the page after the item keyed ``after`` for ``query``."""
    raw = json.dumps({"q": _bind(query), "a": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_token(token: str, query: str) -> str | None:
    """The key after which the page starts, or None for the first page.

    Args:
        token: the request's ``page_token`` ("" for the first page).
        query: what the list is of (the same string ``make_token`` got).

    Raises:
        InvalidInputError: a malformed token, or one from another query.

    Returns:
        The last key of the previous page, or None.
    """
    opened = open_token(token)
    check_token(opened, query)
    return opened.after if opened is not None else None


@dataclass(frozen=True, slots=True)
class PageToken:
    """A token's parts: the query it is bound to (a digest) and the key it continues after."""

    bound: object  # as the token carries it: a query digest, or anything a forger wrote
    after: str


def open_token(token: str) -> PageToken | None:
    """A token read without its query (for a list whose query the authority resolves, such as
    a fork tree's κ): ``check_token`` it against the query once that is known.

    Raises:
        InvalidInputError: a malformed token.

    Returns:
        The token's parts, or None for the first page.
    """
    if not token:
        return None
    if len(token) > _MAX_TOKEN_CHARS:
        raise InvalidInputError("page_token: too long", field="page_token")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        obj = json.loads(raw)
        bound, after = obj["q"], obj["a"]
    except (binascii.Error, ValueError, KeyError, TypeError) as e:
        raise InvalidInputError(
            "page_token: expected a next_page_token from this RPC", field="page_token"
        ) from e
    if not isinstance(after, str):
        raise _another_query()
    return PageToken(bound, after)


def check_token(token: PageToken | None, query: str) -> None:
    """Refuse a token from another query (None, the first page, belongs to any).

    Raises:
        InvalidInputError: the token belongs to another query.
    """
    if token is not None and token.bound != _bind(query):
        raise _another_query()


def _another_query() -> InvalidInputError:
    return InvalidInputError(
        "page_token: it belongs to another query (the other fields must match the first call's)",
        field="page_token",
    )
