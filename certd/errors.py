"""Errors raised by certd.

The tree::

    CertdError
    ├── InvalidInputError          malformed request or task (gRPC INVALID_ARGUMENT)
    │   └── LimitExceededError     input over a configured limit (RESOURCE_EXHAUSTED)
    │       └── RateLimitedError   a client over its rate limit (RESOURCE_EXHAUSTED)
    ├── CertificationRefusedError  a Certify request that policy refuses (FAILED_PRECONDITION)
    ├── NotFoundError              unknown certificate, entry or tree size (NOT_FOUND)
    ├── SigningError               bad key material or a signature that does not verify
    ├── LedgerError                the ledger store or its proofs
    │   ├── ProofError             a proof that does not verify or cannot be built
    │   ├── ConsistencyError       a checkpoint inconsistent with an earlier one
    │   └── StoreError             the storage backend failed
    ├── UnsupportedError           a domain or κ this server does not serve (UNIMPLEMENTED)
    ├── InProgressError            a twin request (same idempotency key) still runs (ABORTED)
    ├── AuthenticationError        missing or invalid credentials (UNAUTHENTICATED)
    ├── PermissionDeniedError      the principal lacks the RPC's role (PERMISSION_DENIED)
    └── ConfigError                invalid configuration

Library code raises these; the CLI renders them and the service maps them to gRPC status
codes in one interceptor.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "CertdError",
    "CertificationRefusedError",
    "ConfigError",
    "ConsistencyError",
    "InProgressError",
    "InvalidInputError",
    "LedgerError",
    "LimitExceededError",
    "NotFoundError",
    "PermissionDeniedError",
    "ProofError",
    "RateLimitedError",
    "SigningError",
    "StoreError",
    "UnsupportedError",
    "WarmingUpError",
]


class CertdError(Exception):
    """Root of every error certd raises on purpose."""


class InvalidInputError(CertdError):
    """A request or task is malformed.

    Attributes:
        field: the request field at fault (dotted path), or "" when not tied to one field.
    """

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class LimitExceededError(InvalidInputError):
    """An input is over a configured limit (size, count, depth)."""


class RateLimitedError(LimitExceededError):
    """A client sent more requests than its rate limit allows (gRPC RESOURCE_EXHAUSTED).

    Attributes:
        retry_after_s: when a request would be accepted again.
    """

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class AuthenticationError(CertdError):
    """A request without valid credentials where they are required (gRPC UNAUTHENTICATED)."""


class PermissionDeniedError(CertdError):
    """An authenticated principal without the role an RPC needs (gRPC PERMISSION_DENIED)."""


class InProgressError(CertdError):
    """A request with the same idempotency key is still running elsewhere (gRPC ABORTED)."""


class CertificationRefusedError(CertdError):
    """Policy refused to certify: the witness is wrong, the label differs, or the gate refused.

    Attributes:
        reason: a stable machine-readable reason code (e.g. ``PSEUDO_FORK``).
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class NotFoundError(CertdError):
    """A certificate, ledger entry or tree size that does not exist."""


class SigningError(CertdError):
    """Bad key material, or a signature or envelope that does not verify."""


class LedgerError(CertdError):
    """Root of ledger errors."""


class ProofError(LedgerError):
    """A Merkle proof that does not verify, or arguments for which no proof exists."""


class ConsistencyError(LedgerError):
    """A checkpoint that is inconsistent with one trusted earlier."""


class StoreError(LedgerError):
    """The ledger's storage backend failed."""


class ConfigError(CertdError):
    """Invalid configuration."""


class UnsupportedError(CertdError):
    """A domain, κ or feature this server does not serve (gRPC UNIMPLEMENTED)."""


class WarmingUpError(CertdError):
    """A domain is still starting (worker pool, model) after the request waited for it
    (gRPC UNAVAILABLE: retry; its health service turns SERVING when it is ready)."""
