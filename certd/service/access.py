"""Access control: TLS server credentials, bearer tokens, mTLS identities and roles per RPC.

Example (a tokens file; only SHA-256 digests of tokens are stored)::

    {"tokens": [{"sha256": "<hex sha256 of the token>", "principal": "trainer-1",
                 "roles": ["verify", "certify"]}]}

A request is authenticated by ``authorization: Bearer <token>`` metadata (matched by the
token's SHA-256 in constant time) or, with mutual TLS, by the common name of its verified
client certificate (``client_roles``). The interceptor then requires the RPC's role:

    method                                     roles that may call it
    Verifier/*                                 verify
    Authority/EnumerateFamilies                verify
    Authority/GetCertificate, GetForkTree,     certify or audit (read-only: auditors and
      ListAcceptances                            witnesses read certificates and decisions)
    Authority/RegisterTaskSet                  operator (acceptance task sets)
    Authority/* (Certify, CertifyBatch,        certify
      BeginAcceptance, Accept)
    Ledger/*                                   audit
    Info/ServerInfo                            any role (what the server serves)

(``docs/operating-a-cluster.md`` has the same matrix; ``tests/integration/test_access.py``
checks every cell.)

The tokens file is read again on the first token-authenticated call after it changes (its
inode, size or mtime): adding or revoking a token needs no restart. A file that no longer
parses is logged and the last good tokens stay in force.

``Health/Check`` needs nothing. ``Health/Watch`` and reflection hold a stream open, so they need
an authenticated caller (any role): no unauthenticated call can hold a resource.
``Info/ServerInfo`` also needs an authenticated caller of any role: every client may learn
what the server serves, no stranger may. With access control off (no tokens file and no
client CA) nothing is checked, and ``check_listen`` allows plaintext on loopback only.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import ipaddress
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from certd.config import AccessConfig
from certd.errors import AuthenticationError, ConfigError, PermissionDeniedError
from certd.service.handlers import Behaviour, rewrap

__all__ = [
    "AccessInterceptor",
    "Principal",
    "ROLES",
    "allowed_roles",
    "check_listen",
    "client_of",
    "current_principal",
    "load_tokens",
    "required_role",
    "server_credentials",
]

_log = logging.getLogger(__name__)

ROLES = ("audit", "certify", "operator", "verify")
"""The roles a principal can hold."""

_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("/certd.v1.Verifier/", ("verify",)),
    ("/certd.v1.Authority/EnumerateFamilies", ("verify",)),
    ("/certd.v1.Authority/GetCertificate", ("certify", "audit")),
    ("/certd.v1.Authority/GetForkTree", ("certify", "audit")),
    ("/certd.v1.Authority/ListAcceptances", ("certify", "audit")),
    # Which task sets an acceptance is judged on is the operator's call, not any trainer's.
    ("/certd.v1.Authority/RegisterTaskSet", ("operator",)),
    ("/certd.v1.Authority/", ("certify",)),
    ("/certd.v1.Ledger/", ("audit",)),
)
_OPEN = ("/grpc.health.v1.Health/Check",)
# authenticated, no role needed
_ANY_ROLE = ("/grpc.health.", "/grpc.reflection.", "/certd.v1.Info/")


@dataclass(frozen=True)
class Principal:
    """An authenticated caller.

    Attributes:
        name: the token's principal or the client certificate's common name.
        roles: the roles it holds.
        via: ``token`` or ``mtls``.
    """

    name: str
    roles: frozenset[str]
    via: str


_current: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "certd_principal", default=None
)


def current_principal() -> Principal | None:
    """The principal of the request this thread is serving, or None.

    Returns:
        The principal set by ``AccessInterceptor``.
    """
    return _current.get()


def allowed_roles(method: str) -> tuple[str, ...] | None:
    """The roles of which a caller needs one to call an RPC.

    Args:
        method: the full method name, ``/package.Service/Method``.

    Returns:
        The roles, None for open methods (``Health/Check``), or an empty tuple for methods any
        authenticated caller may call (``Health/Watch``, reflection: they hold a stream open).

    Raises:
        PermissionDeniedError: the method is unknown (denied by default).
    """
    if method.startswith(_OPEN):
        return None
    if method.startswith(_ANY_ROLE):
        return ()
    for prefix, roles in _RULES:
        if method.startswith(prefix):
            return roles
    raise PermissionDeniedError(f"no role grants {method}")


def client_of(context: grpc.ServicerContext) -> str:
    """The client a request counts against: its authenticated principal, else its peer host.

    Args:
        context: the RPC context.

    Returns:
        A client identifier.
    """
    principal = current_principal()
    if principal is not None:
        return f"principal:{principal.name}"
    peer = context.peer()  # ipv4:127.0.0.1:5555, ipv6:[::1]:5555, unix:...
    host = peer.rsplit(":", 1)[0] if peer.startswith(("ipv4:", "ipv6:")) else peer
    return f"peer:{host}"


def required_role(method: str) -> str | None:
    """The main role of an RPC (the first of ``allowed_roles``).

    Args:
        method: the full method name, ``/package.Service/Method``.

    Returns:
        The role; "" for methods any authenticated caller may use (Health/Watch,
        reflection); None for open methods (Health/Check).

    Raises:
        PermissionDeniedError: the method is unknown (denied by default).
    """
    roles = allowed_roles(method)
    if roles is None:
        return None
    return roles[0] if roles else ""


def load_tokens(path: Path) -> dict[bytes, Principal]:
    """Read a tokens file.

    Args:
        path: the JSON file (see the module docstring).

    Raises:
        ConfigError: the file is unreadable or malformed, or names an unknown role.

    Returns:
        SHA-256 digest → principal.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        out: dict[bytes, Principal] = {}
        for t in data["tokens"]:
            digest = bytes.fromhex(str(t["sha256"]))
            roles = frozenset(str(r) for r in t["roles"])
            if len(digest) != 32 or not roles <= set(ROLES):
                raise ValueError(f"bad digest or roles {sorted(roles)} (known: {ROLES})")
            out[digest] = Principal(str(t["principal"]), roles, "token")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"tokens file {path}: {e}") from e
    return out


def _file_version(path: Path) -> tuple[int, int, int]:
    """What tells a changed file: (inode, size, mtime in ns); an atomic rename changes it."""
    st = path.stat()
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def server_credentials(cfg: AccessConfig) -> grpc.ServerCredentials | None:
    """TLS (and mTLS) server credentials, or None for plaintext.

    Args:
        cfg: the access settings.

    Raises:
        ConfigError: only one of cert/key is set, a file cannot be read, or a client CA is
            set without TLS.

    Returns:
        The credentials.
    """
    if (cfg.tls_cert_file is None) != (cfg.tls_key_file is None):
        raise ConfigError("access: expected both tls_cert_file and tls_key_file, or neither")
    if cfg.tls_cert_file is None or cfg.tls_key_file is None:
        if cfg.client_ca_file is not None:
            raise ConfigError("access: client_ca_file (mTLS) needs tls_cert_file and tls_key_file")
        return None
    refuse_readable_by_others(cfg.tls_key_file, "access.tls_key_file")
    try:
        cert = cfg.tls_cert_file.read_bytes()
        key = cfg.tls_key_file.read_bytes()
        ca = cfg.client_ca_file.read_bytes() if cfg.client_ca_file is not None else None
    except OSError as e:
        raise ConfigError(f"access: cannot read TLS material: {e}") from e
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
    )


def refuse_readable_by_others(path: Path, what: str) -> None:
    """Refuse a private key file that other users (not its owner or group) may access.

    Group access is left alone: Kubernetes makes mounted secrets readable by the pod's
    ``fsGroup``.

    Args:
        path: the key file.
        what: its config key, for the message.

    Raises:
        ConfigError: the file's mode grants other users any access.
    """
    try:
        mode = path.stat().st_mode
    except OSError as e:
        raise ConfigError(f"{what}: cannot read {path}: {e}") from e
    if mode & 0o007:
        raise ConfigError(
            f"{what}: the private key {path} is open to other users (mode {mode & 0o777:04o}); "
            f"expected no access for others (0600, 0400, 0640): chmod 600 {path}"
        )


def check_listen(listen: str, cfg: AccessConfig) -> None:
    """Refuse plaintext, unauthenticated serving on a non-loopback address.

    Args:
        listen: the ``host:port`` to bind.
        cfg: the access settings.

    Raises:
        ConfigError: the address is not loopback and TLS or authentication is off (unless
            ``allow_plaintext_remote``).
    """
    host = listen.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    secure = cfg.tls_cert_file is not None and cfg.enabled
    if not loopback and not secure and not cfg.allow_plaintext_remote:
        raise ConfigError(
            f"listen {listen}: serving beyond loopback needs TLS and authentication "
            "(access.tls_cert_file and access.tokens_file or access.client_ca_file), "
            "or access.allow_plaintext_remote"
        )


class AccessInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]  # generic in stubs
    """Authenticates every RPC and enforces its role."""

    def __init__(self, cfg: AccessConfig) -> None:
        """Load the tokens.

        Args:
            cfg: the access settings.

        Raises:
            ConfigError: the tokens file or a role in ``client_roles`` is invalid.
        """
        self._tokens_file = cfg.tokens_file
        self._tokens_seen: tuple[int, int, int] | None = None
        self._tokens: dict[bytes, Principal] = {}
        if cfg.tokens_file is not None:
            self._tokens_seen = _file_version(cfg.tokens_file)
            self._tokens = load_tokens(cfg.tokens_file)
        self._mtls: dict[str, Principal] = {}
        for name, roles in cfg.client_roles.items():
            if not set(roles) <= set(ROLES):
                raise ConfigError(f"access.client_roles[{name!r}]: unknown roles {roles}")
            self._mtls[name] = Principal(name, frozenset(roles), "mtls")

    def authenticate(self, context: grpc.ServicerContext) -> Principal:
        """Find the caller's principal.

        Args:
            context: the RPC context.

        Raises:
            AuthenticationError: no valid token or client certificate.

        Returns:
            The principal.
        """
        for key, value in context.invocation_metadata():
            if key == "authorization":
                scheme, _, token = str(value).partition(" ")
                if scheme.lower() != "bearer" or not token:
                    raise AuthenticationError("authorization: expected 'Bearer <token>'")
                digest = hashlib.sha256(token.encode()).digest()
                self._reload_tokens()
                for known, principal in self._tokens.items():
                    if hmac.compare_digest(known, digest):
                        return principal
                raise AuthenticationError("authorization: unknown bearer token")
        auth = context.auth_context()
        for cn in auth.get("x509_common_name", []):
            name = cn.decode() if isinstance(cn, bytes) else str(cn)
            if name in self._mtls:
                return self._mtls[name]
            raise AuthenticationError(f"client certificate {name!r} has no roles")
        raise AuthenticationError("expected a bearer token or a client certificate, got none")

    def _reload_tokens(self) -> None:
        """Read the tokens file again when it changed (a revocation takes effect at once).

        A file that no longer parses leaves the last good tokens in force and is logged.
        """
        path = self._tokens_file
        if path is None:
            return
        try:
            seen = _file_version(path)
        except OSError as e:
            _log.error("tokens file %s: %s; keeping the last good tokens", path, e)
            return
        if seen == self._tokens_seen:
            return
        try:
            tokens = load_tokens(path)
        except ConfigError as e:
            _log.error("%s; keeping the last good tokens", e)
            return
        self._tokens, self._tokens_seen = tokens, seen
        _log.info("tokens file %s reloaded: %d tokens", path, len(tokens))

    def _check(self, method: str, context: grpc.ServicerContext) -> Principal | None:
        roles = allowed_roles(method)
        if roles is None:
            return None
        principal = self.authenticate(context)
        if roles and principal.roles.isdisjoint(roles):
            wanted = " or ".join(repr(r) for r in roles)
            raise PermissionDeniedError(
                f"{principal.name} ({principal.via}) lacks role {wanted} for {method}"
            )
        return principal

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method

        def unary(fn: Behaviour, _streamed: bool) -> Behaviour:
            def call(request: Any, context: grpc.ServicerContext) -> Any:
                token = _current.set(self._check(method, context))
                try:
                    return fn(request, context)
                finally:
                    _current.reset(token)

            return call

        def stream(fn: Behaviour, _streamed: bool) -> Behaviour:
            def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                token = _current.set(self._check(method, context))
                try:
                    yield from fn(request, context)
                finally:
                    try:
                        _current.reset(token)
                    except ValueError:  # closed from another context (a cancelled stream)
                        pass

            return call

        return rewrap(handler, unary, stream)
