"""forkgate: the trainer-side library that admits only certified data.

Example:
    >>> from forkgate import make_task
    >>> make_task("countdown", {"numbers": [25, 5, 4, 3], "target": 83}).countdown.target
    83

It imports only the light parts of certd (the ``certd.v1`` stubs and the verification
primitives), never the server, stores or domains.
"""

from ._base import VerifyItem
from ._channel import ClientSettings
from .aio import AsyncCertdClient
from .client import CertdClient
from .connection import Connection
from .errors import (
    CertdUnavailableError,
    CertificationRefusedError,
    DeadlineExceededError,
    ForkgateError,
    InvalidRequestError,
    NotFoundError,
    PromotionRefusedError,
    ResourceExhaustedError,
    ServerError,
    UnimplementedError,
    VerificationError,
)
from .tasks import as_task, make_task
from .verdicts import Status, TypedVerdict

__all__ = [
    "AsyncCertdClient",
    "CertdClient",
    "CertdUnavailableError",
    "CertificationRefusedError",
    "ClientSettings",
    "Connection",
    "DeadlineExceededError",
    "ForkgateError",
    "InvalidRequestError",
    "NotFoundError",
    "PromotionRefusedError",
    "ResourceExhaustedError",
    "ServerError",
    "Status",
    "TypedVerdict",
    "UnimplementedError",
    "VerificationError",
    "VerifyItem",
    "as_task",
    "make_task",
]
