"""Errors raised by certd.

The tree::

    CertdError
    ├── InvalidInputError          malformed request or task (gRPC INVALID_ARGUMENT)
    │   └── LimitExceededError     input over a configured limit (RESOURCE_EXHAUSTED)
    │       ├── RateLimitedError   a client over its rate limit (RESOURCE_EXHAUSTED)
    │       └── ServerBusyError    RPCs in flight at the server's or the client's bound
    ├── CertificationRefusedError  a Certify request that policy refuses (FAILED_PRECONDITION)
    ├── NotFoundError              unknown certificate, entry or tree size (NOT_FOUND)
    ├── SigningError               bad key material or a signature that does not verify
    │   ├── MalformedStatementError  not a well-formed envelope/statement, wrong payloadType
    │   ├── UnknownKeyError        no trusted key has the key id (valid at the statement's time)
    │   ├── BadSignatureError      a trusted key's signature does not verify
    │   └── WrongPredicateError    a statement of another predicate type than expected
    ├── TamperedError              a copy of a signed fact disagrees with the signed payload
    ├── LedgerError                the ledger store or its proofs
    │   ├── ProofError             a malformed proof, or arguments for which none exists
    │   │   └── RootMismatchError  a well-formed proof that leads to another root (a fork)
    │   ├── ConsistencyError       a checkpoint inconsistent with an earlier one
    │   ├── StoreDamageError       the store lacks or garbles state its tree needs (exit 1)
    │   └── StoreError             the storage backend failed (unreachable: exit 3)
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
    "BadSignatureError",
    "CertdError",
    "CertificationRefusedError",
    "ConfigError",
    "ConsistencyError",
    "InProgressError",
    "InvalidInputError",
    "LedgerError",
    "LimitExceededError",
    "MalformedStatementError",
    "NotFoundError",
    "PermissionDeniedError",
    "ProofError",
    "RateLimitedError",
    "RootMismatchError",
    "RotatedKeyError",
    "ServerBusyError",
    "SigningError",
    "StoreDamageError",
    "StoreError",
    "TamperedError",
    "UnknownKeyError",
    "UnsupportedError",
    "WarmingUpError",
    "WrongPredicateError",
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


class ServerBusyError(LimitExceededError):
    """The server already runs its bound of RPCs, or the client its share (RESOURCE_EXHAUSTED)."""


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


class MalformedStatementError(SigningError):
    """Bytes that are not a well-formed DSSE envelope or in-toto statement of the expected shape."""


class UnknownKeyError(SigningError):
    """No trusted key has the envelope's key id, or none is valid at the statement's time."""


class RotatedKeyError(UnknownKeyError):
    """A trusted log key signed outside the ledger indexes a key-rotation statement leaves it.

    An entry signed by a rotated-out key after the rotation entry's index, or by the incoming
    key before it (``certd.keyrotation``).
    """


class BadSignatureError(SigningError):
    """A trusted key's signature over the envelope does not verify."""


class WrongPredicateError(SigningError):
    """A well-signed statement of another predicate type than the one expected."""


class TamperedError(CertdError):
    """A copy of a signed fact (certificate id, index, label, witness…) disagrees with the payload.

    Attributes:
        field: the copied field that disagrees (e.g. ``certificate_id``, ``label.kappa``).
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class LedgerError(CertdError):
    """Root of ledger errors."""


class ProofError(LedgerError):
    """A Merkle proof that does not verify, or arguments for which no proof exists."""


class RootMismatchError(ProofError):
    """A well-formed proof that leads to another root than the one trusted: evidence of a fork.

    Attributes:
        expected: the trusted root.
        got: the root the proof implies.
    """

    def __init__(self, message: str, *, expected: bytes, got: bytes) -> None:
        super().__init__(message)
        self.expected = expected
        self.got = got


class ConsistencyError(LedgerError):
    """A checkpoint that is inconsistent with one trusted earlier."""


class StoreError(LedgerError):
    """The ledger's storage backend failed."""


class StoreDamageError(LedgerError):
    """The store answered, but lacks or garbles state its tree needs (a missing entry or
    node, a row of the wrong type): damage to repair, not an outage (exit 1, not 3)."""


class ConfigError(CertdError):
    """Invalid configuration."""


class UnsupportedError(CertdError):
    """A domain, κ or feature this server does not serve (gRPC UNIMPLEMENTED)."""


class WarmingUpError(CertdError):
    """A domain is still starting (worker pool, model) after the request waited for it
    (gRPC UNAVAILABLE: retry; its health service turns SERVING when it is ready)."""
