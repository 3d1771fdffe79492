"""Errors raised by the forkgate client.

The tree::

    ForkgateError
    ├── CertdUnavailableError     certd could not be reached after retries (UNAVAILABLE)
    ├── DeadlineExceededError     the call ran past its deadline
    ├── InvalidRequestError       rejected as malformed (INVALID_ARGUMENT); ``field`` says where
    │   └── ResourceExhaustedError  over a server limit (RESOURCE_EXHAUSTED)
    ├── CertificationRefusedError certd refused to certify; ``reason`` is the code
    ├── PromotionRefusedError     a checkpoint may not be promoted (no valid acceptance)
    ├── NotFoundError             no such certificate, entry or size
    ├── UnimplementedError        the server does not serve this domain or RPC
    ├── ServerError               any other server-side failure (``request_id`` to quote)
    ├── TrainingStalledError      a trainer adapter's batches train on nothing (refused/unscored)
    ├── UsedAfterForkError        an AsyncCertdClient used in a child process after fork()
    └── VerificationError         a receipt, certificate or proof did not verify offline

The client raises these; the ``forkgate`` CLI renders them and exits with
``forkgate_exit_code`` (docs/exit-codes.md).
"""

from __future__ import annotations

__all__ = [
    "CertdUnavailableError",
    "CertificationRefusedError",
    "DeadlineExceededError",
    "ForkgateError",
    "InvalidRequestError",
    "NotFoundError",
    "PromotionRefusedError",
    "ResourceExhaustedError",
    "ServerError",
    "SetupError",
    "TrainingStalledError",
    "UnimplementedError",
    "UsedAfterForkError",
    "VerificationError",
    "forkgate_exit_code",
]


class ForkgateError(Exception):
    """Root of every error the forkgate client raises on purpose.

    Attributes:
        request_id: the server's request id when it sent one ("" otherwise).
    """

    def __init__(self, message: str, *, request_id: str = "") -> None:
        super().__init__(message)
        self.request_id = request_id


class CertdUnavailableError(ForkgateError):
    """certd could not be reached (after retries)."""


class DeadlineExceededError(ForkgateError):
    """The call ran past its deadline."""


class InvalidRequestError(ForkgateError):
    """certd rejected the request as malformed.

    Attributes:
        field: the request field at fault, as certd named it ("" when not tied to a field).
    """

    def __init__(self, message: str, *, field: str = "", request_id: str = "") -> None:
        super().__init__(message, request_id=request_id)
        self.field = field


class ResourceExhaustedError(InvalidRequestError):
    """The request is over a server limit."""


class CertificationRefusedError(ForkgateError):
    """certd refused to certify.

    Attributes:
        reason: WITNESS_NOT_CORRECT, LABEL_MISMATCH, PSEUDO_FORK, KAPPA_UNKNOWN or
            KAPPA_NOT_FITTED (the learned κ: no model recorded by ``certd kappa-fit``).
    """

    def __init__(self, message: str, *, reason: str, request_id: str = "") -> None:
        super().__init__(message, request_id=request_id)
        self.reason = reason


class PromotionRefusedError(ForkgateError):
    """A checkpoint may not be promoted: certd refused it, or its certificate did not verify.

    Attributes:
        reason: the refusal code (``CAPABILITY_FELL``, ``TARGET_NOT_IMPROVED``) or the
            checkpoint ratchet's reason (``BAD_SIGNATURE``, ``BROKEN_CHAIN``, …).
        drops: for a certd refusal, the ``certd.v1.CapabilityDrop`` messages.
    """

    def __init__(
        self, message: str, *, reason: str, drops: tuple[object, ...] = (), request_id: str = ""
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.reason = reason
        self.drops = drops


class SetupError(ForkgateError):
    """This install or machine cannot do what was asked (a missing extra, no GPU): usage, exit 2."""


class NotFoundError(ForkgateError):
    """No such certificate, entry or tree size."""


class UnimplementedError(ForkgateError):
    """The server does not serve this domain or RPC."""


class ServerError(ForkgateError):
    """Any other server-side failure."""


class TrainingStalledError(ForkgateError):
    """A trainer adapter's batch (or run of batches) left too many rollouts out of training.

    Raised by ``forkgate.adapters`` when the ratchet refused, or certd could not score, more
    rollouts than allowed (``LeftOutGuard``): training would otherwise go on with zero signal.

    Attributes:
        counts: the batch's ``LeftOutCounts`` (step, total, refused, unscored).
    """

    def __init__(self, message: str, *, counts: object = None) -> None:
        super().__init__(message)
        self.counts = counts


class UsedAfterForkError(ForkgateError):
    """An ``AsyncCertdClient`` was used in a process forked from the one that made it.

    Its ``grpc.aio`` channel belongs to an event loop of the parent process, and neither the
    loop nor ``grpc.aio`` survives ``fork()``; the child uses a ``CertdClient``, which
    reconnects after a fork (``AsyncCertdClient``'s docstring says why).
    """


class VerificationError(ForkgateError):
    """A receipt, certificate, checkpoint or proof did not verify."""


def forkgate_exit_code(error: ForkgateError) -> int:
    """The CLI exit code of a client error (``certd.exitcodes``: 1 refused, 2 usage, 3 down)."""
    if isinstance(error, CertdUnavailableError | DeadlineExceededError):
        return 3
    if isinstance(error, InvalidRequestError | NotFoundError | SetupError):
        return 2  # usage: a bad argument, or a name (run, certificate, size) that is not there
    return 1
