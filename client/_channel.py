"""How a client reaches certd: its settings, the gRPC target and options, TLS credentials.

Example:
    >>> channel_target("10.0.0.1:50051,10.0.0.2:50051")
    ('ipv4:10.0.0.1:50051,10.0.0.2:50051', [('grpc.lb_policy_name', 'round_robin')])
    >>> ClientSettings(max_retries=0).channel_options()[0]
    ('grpc.max_receive_message_length', 67108864)
    >>> spec = channel_spec("certd.internal", ClientSettings())
    >>> spec.target, spec.credentials is None
    ('certd.internal:50051', True)

``CertdClient`` and ``AsyncCertdClient`` build their channel from a ``ChannelSpec`` and put
certd's ``Stubs`` on it (``forkgate.connection`` gathers the same settings from flags and the
environment); nothing here opens a channel.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from certd.netaddr import with_default_port
from certd.v1 import authority_pb2_grpc, info_pb2_grpc, ledger_pb2_grpc, verifier_pb2_grpc

from ._retry import MAX_ATTEMPTS, service_config

if TYPE_CHECKING:  # the sync client never needs grpc.aio loaded
    import grpc.aio

__all__ = [
    "ChannelSpec",
    "ClientSettings",
    "Stubs",
    "call_metadata",
    "channel_credentials",
    "channel_spec",
    "channel_target",
    "server_name_options",
]


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """Client behaviour. Units are in the names.

    Retries are gRPC's own (the channel's service config, ``forkgate._retry``): per method,
    by whether it is safe to repeat.

    Attributes:
        timeout_s: deadline of each call: every attempt, backoff and any wait for certd.
        max_retries: retries after a failed attempt (UNAVAILABLE; with an idempotency key
            also ABORTED), at most 4 (gRPC's cap of 5 attempts); 0 turns retries off. A
            larger value is deprecated: it is lowered to 4 and turns on ``wait_for_ready``.
        backoff_s: the first retry's backoff ceiling; doubles each retry (gRPC draws the
            delay uniformly below it), capped at ``backoff_max_s``. Also the channel's
            reconnect backoff.
        backoff_max_s: the largest backoff.
        wait_for_ready: when certd cannot be reached, wait for it (up to ``timeout_s``)
            instead of failing at once: the way to ride out a restart or a failover.
        batch_size: items per VerifyBatch / CertifyBatch call.
        max_message_bytes: gRPC send/receive limit, and the retry buffer of each call (a
            request up to this size is still retried).
    """

    timeout_s: float = 60.0
    max_retries: int = 4
    backoff_s: float = 0.1
    backoff_max_s: float = 5.0
    wait_for_ready: bool = False
    batch_size: int = 1000
    max_message_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        if self.max_retries >= MAX_ATTEMPTS:
            warnings.warn(
                f"ClientSettings(max_retries={self.max_retries}): gRPC makes at most "
                f"{MAX_ATTEMPTS} attempts; using max_retries={MAX_ATTEMPTS - 1} and "
                "wait_for_ready=True (waits for certd up to timeout_s)",
                DeprecationWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "max_retries", MAX_ATTEMPTS - 1)
            object.__setattr__(self, "wait_for_ready", True)
        if self.max_retries < 0:
            raise ValueError(f"max_retries: expected 0 or more, got {self.max_retries}")

    def channel_options(self) -> list[tuple[str, int | str]]:
        """gRPC channel options for these settings (limits, retry policy, reconnects)."""
        # The channel's own reconnect backoff (1 s and growing by default) would keep a call
        # waiting for certd long after it is back; keep it in step with the retry backoff.
        reconnect_ms = max(1, int(self.backoff_s * 1000))
        config = service_config(
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
            backoff_max_s=self.backoff_max_s,
        )
        return [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.service_config", config),
            ("grpc.enable_retries", 1),
            ("grpc.per_rpc_retry_buffer_size", self.max_message_bytes),
            ("grpc.initial_reconnect_backoff_ms", reconnect_ms),
            ("grpc.min_reconnect_backoff_ms", reconnect_ms),
            ("grpc.max_reconnect_backoff_ms", max(reconnect_ms, int(self.backoff_max_s * 1000))),
            # gRPC shares a connection (subchannel) between channels with the same target and
            # options, backoff included: a client made after certd came up would fail at once
            # with "Connection refused" while an earlier client of the process still waits to
            # reconnect. Each client owns its connections instead.
            ("grpc.use_local_subchannel_pool", 1),
        ]


def channel_target(address: str | Sequence[str]) -> tuple[str, list[tuple[str, str]]]:
    """The gRPC target and extra options for one address or several replicas.

    Several ``IP:port`` addresses (a list, or one comma-separated string) become one
    ``ipv4:``/``ipv6:`` target balanced ``round_robin``: a replica that dies is skipped and
    the call retried on another.

    Args:
        address: ``host:port``, or several ``IP:port`` of certd replicas; a host without
            a port gets certd's default port (``certd.netaddr.DEFAULT_PORT``, 50051), not
            gRPC's 443.

    Returns:
        (target, channel options).
    """
    parts = [a.strip() for a in ([address] if isinstance(address, str) else address)]
    parts = [with_default_port(p) for a in parts for p in a.split(",") if p.strip()]
    if len(parts) == 1:
        return parts[0], []
    scheme = "ipv6" if all(p.startswith("[") for p in parts) else "ipv4"
    return f"{scheme}:{','.join(parts)}", [("grpc.lb_policy_name", "round_robin")]


def server_name_options(
    server_name: str | None, tls_ca: str | Path | None, tls_cert: str | Path | None
) -> list[tuple[str, str]]:
    """Channel options that check certd's TLS certificate against ``server_name``.

    A client balancing over several replica addresses (``ipv4:a,b,c``) has no single host
    name to verify; every replica's certificate carries a common SAN (``certd.example``)
    and the client names it here. It also becomes the ``:authority`` of each call.

    Args:
        server_name: the SAN to expect, or None to check the address as given.
        tls_ca: the CA file (TLS on when set).
        tls_cert: the client certificate file (TLS on when set).

    Raises:
        ValueError: a server name without TLS.

    Returns:
        The options to add.
    """
    if server_name is None:
        return []
    if tls_ca is None and tls_cert is None:
        raise ValueError("a TLS server name needs TLS (tls_ca)")
    return [("grpc.ssl_target_name_override", server_name), ("grpc.default_authority", server_name)]


def channel_credentials(
    tls_ca: str | Path | None = None,
    tls_cert: str | Path | None = None,
    tls_key: str | Path | None = None,
    token: str | None = None,
) -> grpc.ChannelCredentials | None:
    """Credentials for a TLS channel: server CA, optional client cert (mTLS), bearer token.

    Args:
        tls_ca: PEM file of the CA that signed certd's certificate; None with no other
            argument means plaintext (loopback).
        tls_cert: PEM client certificate for mutual TLS.
        tls_key: its PEM private key.
        token: a bearer token, sent as ``authorization: Bearer <token>`` (TLS only).

    Raises:
        ValueError: only one of ``tls_cert``/``tls_key``, or a token without TLS.

    Returns:
        The channel credentials, or None for a plaintext channel.
    """
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("expected both tls_cert and tls_key, or neither")
    if tls_ca is None and tls_cert is None:
        if token is not None:
            raise ValueError("a bearer token needs TLS (tls_ca)")
        return None
    ssl = grpc.ssl_channel_credentials(
        root_certificates=Path(tls_ca).read_bytes() if tls_ca is not None else None,
        private_key=Path(tls_key).read_bytes() if tls_key is not None else None,
        certificate_chain=Path(tls_cert).read_bytes() if tls_cert is not None else None,
    )
    if token is None:
        return ssl
    return grpc.composite_channel_credentials(ssl, grpc.access_token_call_credentials(token))


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """Everything a client's channel is built from.

    A client keeps it so that it can build the same channel again: ``CertdClient`` does in a
    process forked from the one that built the first (gRPC channels do not cross ``fork()``).

    Attributes:
        target: the gRPC target (``channel_target``).
        options: the channel options: the settings', the balancing policy, the TLS name.
        credentials: TLS credentials, or None for a plaintext channel.
    """

    target: str
    options: tuple[tuple[str, int | str], ...]
    credentials: grpc.ChannelCredentials | None


def channel_spec(
    address: str | Sequence[str],
    settings: ClientSettings,
    *,
    tls_ca: str | Path | None = None,
    tls_cert: str | Path | None = None,
    tls_key: str | Path | None = None,
    token: str | None = None,
    tls_server_name: str | None = None,
) -> ChannelSpec:
    """The channel a client with these arguments connects through (see ``CertdClient``).

    Raises:
        ValueError: contradictory TLS arguments (``channel_credentials``,
            ``server_name_options``).
        OSError: a TLS file cannot be read.

    Returns:
        The target, options and credentials, nothing opened yet.
    """
    target, balancing = channel_target(address)
    options = [*settings.channel_options(), *balancing]
    options += server_name_options(tls_server_name, tls_ca, tls_cert)
    credentials = channel_credentials(tls_ca, tls_cert, tls_key, token)
    return ChannelSpec(target, tuple(options), credentials)


@dataclass(frozen=True, slots=True)
class Stubs:
    """The stubs of certd's services on one channel, a ``grpc`` or a ``grpc.aio`` one."""

    verifier: verifier_pb2_grpc.VerifierStub
    authority: authority_pb2_grpc.AuthorityStub
    ledger: ledger_pb2_grpc.LedgerStub
    info: info_pb2_grpc.InfoStub

    @classmethod
    def on(cls, channel: grpc.Channel | grpc.aio.Channel) -> Stubs:
        """Stubs that call through ``channel`` (making them sends nothing)."""
        return cls(
            verifier_pb2_grpc.VerifierStub(channel),
            authority_pb2_grpc.AuthorityStub(channel),
            ledger_pb2_grpc.LedgerStub(channel),
            info_pb2_grpc.InfoStub(channel),
        )


def call_metadata(idempotent: bool) -> tuple[tuple[str, str], ...] | None:
    """A call's metadata: a fresh ``idempotency-key`` (gRPC sends it with every attempt).

    Every method the service config lets retry ABORTED (``forkgate._retry.KEYED``) is
    called with one, so a retry is never a second run of the request in a certd cluster.
    """
    return (("idempotency-key", uuid.uuid4().hex),) if idempotent else None
