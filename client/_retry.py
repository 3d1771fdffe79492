"""The client's retries, as gRPC's own service config: one ``retryPolicy`` per method.

Example:
    >>> import json
    >>> config = json.loads(service_config(max_retries=4, backoff_s=0.1, backoff_max_s=5.0))
    >>> [c.get("retryPolicy", {}).get("retryableStatusCodes") for c in config["methodConfig"]]
    [['UNAVAILABLE', 'ABORTED'], ['UNAVAILABLE'], None]

gRPC retries a failed attempt itself (gRFC A6), within the call's deadline, with exponential
backoff and jitter; the client makes one call. What each method may retry depends on whether
running it twice is safe:

- **with an idempotency key** (``KEYED``: VerifyBatch, Certify, CertifyBatch): the client
  sends one ``idempotency-key`` for every attempt, so a certd cluster runs the request once
  and replays its reply; UNAVAILABLE (not reached, or a replica died) and ABORTED (a twin
  with the same key still runs) are retried. Without a cluster a repeat is harmless too: a
  verdict is recomputed, a Certify of a certified label returns the same certificate.
- **reads and other idempotent calls** (``IDEMPOTENT``): UNAVAILABLE only.
- **not idempotent** (BeginAcceptance draws a fresh challenge, Accept records a decision;
  VerifyStream is a stream): no policy. gRPC still retries an attempt that never reached
  certd (a transparent retry), which is safe by construction.

gRPC caps attempts at 5 (``max_retries`` 4). Riding out a certd that is down (a restart, a
failover with every replica gone) is not more attempts but ``wait_for_ready``: the call waits
for a connection, up to its deadline. gRPC stops retrying a call once certd sent response
headers (certd sends them only with a reply) or once its request is larger than the channel's
retry buffer (``grpc.per_rpc_retry_buffer_size``, which the client sets to its largest
message).
"""

from __future__ import annotations

import json

__all__ = ["IDEMPOTENT", "KEYED", "MAX_ATTEMPTS", "NOT_RETRIED", "service_config"]

MAX_ATTEMPTS = 5
"""gRPC's cap on ``retryPolicy.maxAttempts`` (larger values are silently lowered to it)."""

KEYED: tuple[tuple[str, str], ...] = (
    ("certd.v1.Verifier", "VerifyBatch"),
    ("certd.v1.Authority", "Certify"),
    ("certd.v1.Authority", "CertifyBatch"),
)
"""Methods the client always calls with an idempotency key: UNAVAILABLE and ABORTED retried."""

IDEMPOTENT: tuple[tuple[str, str], ...] = (
    ("certd.v1.Verifier", "Verify"),
    ("certd.v1.Authority", "GetCertificate"),
    ("certd.v1.Authority", "GetForkTree"),
    ("certd.v1.Authority", "EnumerateFamilies"),
    ("certd.v1.Authority", "RegisterTaskSet"),  # the same set again: ``existing``
    ("certd.v1.Authority", "ListAcceptances"),
    ("certd.v1.Ledger", ""),  # every method of the service
    ("certd.v1.Info", ""),
)
"""Idempotent methods called without a key: UNAVAILABLE retried."""

NOT_RETRIED: tuple[tuple[str, str], ...] = (
    ("certd.v1.Authority", "BeginAcceptance"),
    ("certd.v1.Authority", "Accept"),
    ("certd.v1.Verifier", "VerifyStream"),
)
"""Methods with no retry policy (transparent retries only)."""


def _names(methods: tuple[tuple[str, str], ...]) -> list[dict[str, str]]:
    return [{"service": s, "method": m} if m else {"service": s} for s, m in methods]


def _seconds(value: float) -> str:
    return f"{max(value, 0.001):.3f}s"  # a proto Duration; gRPC needs a positive backoff


def service_config(*, max_retries: int, backoff_s: float, backoff_max_s: float) -> str:
    """The channel's service config (JSON): a retry policy for each method group.

    Args:
        max_retries: retries after the first attempt (at most ``MAX_ATTEMPTS - 1``; 0 gives
            no retry policy).
        backoff_s: the first retry's backoff ceiling; doubles each retry (gRPC draws the
            delay uniformly below it).
        backoff_max_s: the largest backoff ceiling.

    Raises:
        ValueError: ``max_retries`` outside 0 … ``MAX_ATTEMPTS - 1``.

    Returns:
        The JSON for the ``grpc.service_config`` channel option.
    """
    if not 0 <= max_retries < MAX_ATTEMPTS:
        raise ValueError(f"max_retries: expected 0 to {MAX_ATTEMPTS - 1}, got {max_retries}")
    groups = ((KEYED, ["UNAVAILABLE", "ABORTED"]), (IDEMPOTENT, ["UNAVAILABLE"]))
    configs: list[dict[str, object]] = []
    for methods, codes in groups:
        config: dict[str, object] = {"name": _names(methods)}
        if max_retries:
            config["retryPolicy"] = {
                "maxAttempts": max_retries + 1,
                "initialBackoff": _seconds(backoff_s),
                "maxBackoff": _seconds(max(backoff_s, backoff_max_s)),
                "backoffMultiplier": 2,
                "retryableStatusCodes": codes,
            }
        configs.append(config)
    configs.append({"name": _names(NOT_RETRIED)})
    return json.dumps({"methodConfig": configs})
