"""How to reach certd: replica addresses, TLS, client certificate, bearer token, server name.

Example::

    from forkgate.connection import Connection
    conn = Connection.from_env()                    # FORKGATE_SERVER, FORKGATE_TLS_CA, ...
    conn = Connection(("10.0.0.1:50051", "10.0.0.2:50051"), tls_ca="ca.crt",
                      tls_server_name="certd.internal", token_file="trainer.token")
    with conn.client(trusted_keys=["signing.pub"]) as client:
        client.checkpoint()

One object for every entry point: ``CertdClient``/``AsyncCertdClient`` (``conn.client()``,
``conn.aio_client()``), the TRL reward and the verl ``compute_score`` (which take a
``Connection`` or the same settings as keyword arguments) and the ``forkgate`` CLI verbs
(``add_connection_flags`` / ``connection_from_args``). Unset settings fall back to the
environment:

    FORKGATE_SERVER           host:port, or several IP:port separated by commas
    FORKGATE_TLS_CA           CA file of certd's certificate (TLS on)
    FORKGATE_TLS_CERT/_KEY    client certificate and key files (mutual TLS)
    FORKGATE_TOKEN_FILE       file holding the bearer token (FORKGATE_TOKEN: the token itself)
    FORKGATE_TLS_SERVER_NAME  the SAN to check instead of the address (several replicas)

A token is read from a file or the environment, never from a command-line flag (other users
can read a process's arguments).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from ._channel import ClientSettings, channel_credentials, server_name_options
from .aio import AsyncCertdClient
from .client import CertdClient
from .errors import InvalidRequestError

if TYPE_CHECKING:  # signing loads only when receipts are checked (start-up time)
    from certd.signing.dsse import KeyRing
    from certd.signing.keys import VerifierKey

__all__ = [
    "Connection",
    "DEFAULT_SERVER",
    "add_connection_flags",
    "client_from_args",
    "connection_from_args",
    "split_addresses",
]

DEFAULT_SERVER = "127.0.0.1:50051"
"""certd's default listen address."""

_ENV = {
    "addresses": "FORKGATE_SERVER",
    "tls_ca": "FORKGATE_TLS_CA",
    "tls_cert": "FORKGATE_TLS_CERT",
    "tls_key": "FORKGATE_TLS_KEY",
    "token_file": "FORKGATE_TOKEN_FILE",
    "tls_server_name": "FORKGATE_TLS_SERVER_NAME",
}

Keys = Union["KeyRing", Iterable[Union[str, Path, "VerifierKey"]], None]


def split_addresses(value: str | Sequence[str]) -> tuple[str, ...]:
    """``"a:1,b:2"`` or ``["a:1", "b:2,c:3"]`` → ``("a:1", "b:2", "c:3")``."""
    parts = [value] if isinstance(value, str) else list(value)
    return tuple(p.strip() for part in parts for p in part.split(",") if p.strip())


@dataclass(frozen=True)
class Connection:
    """Where certd is and how to authenticate to it.

    Attributes:
        addresses: ``host:port`` of certd, or the ``IP:port`` of each replica (balanced
            round-robin; a replica that dies is skipped).
        tls_ca: PEM CA file of certd's certificate; None for plaintext (loopback only).
        tls_cert: PEM client certificate for mutual TLS (with ``tls_key``).
        tls_key: its private key file.
        token: a bearer token (TLS only); not shown in ``repr``.
        token_file: a file holding the bearer token (read when the client is made).
        tls_server_name: the SAN every replica's certificate carries, checked instead of
            the address (required for TLS over several IP addresses).
    """

    addresses: tuple[str, ...] = (DEFAULT_SERVER,)
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    tls_server_name: str | None = None

    def __post_init__(self) -> None:
        addresses = split_addresses(self.addresses)
        if not addresses:
            raise InvalidRequestError("expected at least one certd address, got none")
        object.__setattr__(self, "addresses", addresses)
        if self.token is not None and self.token_file is not None:
            raise InvalidRequestError("expected a token or a token file, got both")
        try:  # the same checks the channel makes, before anything connects
            server_name_options(self.tls_server_name, self.tls_ca, self.tls_cert)
            if (self.tls_cert is None) != (self.tls_key is None):
                raise ValueError("expected both tls_cert and tls_key, or neither")
            if self.tls_ca is None and self.tls_cert is None and self.has_token:
                raise ValueError("a bearer token needs TLS (tls_ca)")
        except ValueError as e:
            raise InvalidRequestError(str(e)) from e

    @property
    def has_token(self) -> bool:
        """Whether a token (or a token file) is set."""
        return self.token is not None or self.token_file is not None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **given: Any) -> Connection:
        """Settings given here, else from the environment, else the defaults.

        Args:
            env: the environment (``os.environ`` when None).
            given: ``Connection`` fields; a None value counts as not given.

        Raises:
            InvalidRequestError: the settings contradict each other.

        Returns:
            The connection.
        """
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, var in _ENV.items():
            if given.get(name) is not None:
                values[name] = given[name]
            elif env.get(var):
                values[name] = env[var]
        if given.get("token") is not None:
            values["token"] = given["token"]
        elif "token_file" not in values and env.get("FORKGATE_TOKEN"):
            values["token"] = env["FORKGATE_TOKEN"]
        return cls(**values)

    def read_token(self) -> str | None:
        """The bearer token (read from ``token_file`` when that is set).

        Raises:
            InvalidRequestError: the token file cannot be read or is empty.
        """
        if self.token_file is None:
            return self.token
        try:
            token = Path(self.token_file).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise InvalidRequestError(f"cannot read the token file {self.token_file}: {e}") from e
        if not token:
            raise InvalidRequestError(f"expected a token in {self.token_file}, got an empty file")
        return token

    def _kwargs(self) -> dict[str, Any]:
        return {
            "tls_ca": self.tls_ca,
            "tls_cert": self.tls_cert,
            "tls_key": self.tls_key,
            "token": self.read_token(),
            "tls_server_name": self.tls_server_name,
        }

    def client(
        self, *, trusted_keys: Keys = None, settings: ClientSettings | None = None
    ) -> CertdClient:
        """A blocking client over this connection."""
        return CertdClient(
            list(self.addresses), trusted_keys=trusted_keys, settings=settings, **self._kwargs()
        )

    def aio_client(
        self, *, trusted_keys: Keys = None, settings: ClientSettings | None = None
    ) -> AsyncCertdClient:
        """An asyncio client over this connection."""
        return AsyncCertdClient(
            list(self.addresses), trusted_keys=trusted_keys, settings=settings, **self._kwargs()
        )

    def with_addresses(self, addresses: str | Sequence[str]) -> Connection:
        """The same connection to other addresses."""
        return replace(self, addresses=split_addresses(addresses))


def check_credentials(conn: Connection) -> None:
    """Build the channel credentials once, so a missing CA or key file fails early.

    Raises:
        InvalidRequestError: a file cannot be read.
    """
    try:
        channel_credentials(conn.tls_ca, conn.tls_cert, conn.tls_key, conn.read_token())
    except OSError as e:
        raise InvalidRequestError(f"cannot read a TLS file: {e}") from e


def add_connection_flags(
    parser: argparse.ArgumentParser, *, default: str | None = DEFAULT_SERVER, help: str = ""
) -> None:
    """Add ``--server`` (repeatable or comma-separated), ``--tls-ca``, ``--tls-cert``,
    ``--tls-key``, ``--token-file`` and ``--tls-server-name`` to a verb's parser.

    Unset flags fall back to the ``FORKGATE_*`` environment (see the module docstring).

    Args:
        parser: the verb's parser.
        default: the address when neither ``--server`` nor ``FORKGATE_SERVER`` is given;
            None or ``""`` for verbs where no server means "do without one".
        help: the ``--server`` help text.
    """
    g = parser.add_argument_group("connection (flags override FORKGATE_* variables)")
    g.add_argument(
        "--server",
        action="append",
        default=None,
        help=help
        or f"certd address; several IP:port replicas comma-separated or repeated "
        f"(default: $FORKGATE_SERVER or {default or 'none'})",
    )
    g.add_argument("--tls-ca", default=None, help="CA file of certd's TLS certificate")
    g.add_argument("--tls-cert", default=None, help="client certificate file (mutual TLS)")
    g.add_argument("--tls-key", default=None, help="client certificate key file")
    g.add_argument("--token-file", default=None, help="file holding the bearer token")
    g.add_argument(
        "--tls-server-name", default=None, help="the SAN to check instead of the address"
    )
    parser.set_defaults(_server_default=default)


def connection_from_args(
    args: argparse.Namespace, env: Mapping[str, str] | None = None
) -> Connection | None:
    """The connection the flags (then the environment) describe.

    Args:
        args: parsed arguments of a parser given ``add_connection_flags``.
        env: the environment (``os.environ`` when None).

    Raises:
        InvalidRequestError: contradictory settings or an unreadable TLS file.

    Returns:
        The connection, or None when no server is given and the verb has no default.
    """
    env = os.environ if env is None else env
    servers = split_addresses(args.server) if args.server else None
    if servers is None and not env.get("FORKGATE_SERVER"):
        if not args._server_default:
            return None
        servers = (args._server_default,)
    conn = Connection.from_env(
        env,
        addresses=servers,
        tls_ca=args.tls_ca,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        token_file=args.token_file,
        tls_server_name=args.tls_server_name,
    )
    check_credentials(conn)
    return conn


def client_from_args(
    args: argparse.Namespace,
    *,
    trusted_keys: Keys = None,
    settings: ClientSettings | None = None,
) -> CertdClient:
    """A blocking client for a CLI verb (``add_connection_flags`` gave its flags).

    Raises:
        InvalidRequestError: no server given to a verb without a default, contradictory
            settings or an unreadable TLS file.
    """
    conn = connection_from_args(args)
    if conn is None:
        raise InvalidRequestError("--server: expected a certd address, got none", field="server")
    return conn.client(trusted_keys=trusted_keys, settings=settings)
