"""The Info service: what this certd serves (``ServerInfo``; ``certd info`` prints it).

Example::

    info = server_info(cfg, checkers, key, ledger, learned_names=())
    info.domains[0].name, info.log.origin        # ('countdown', 'forkgate.local/certd')

The reply is built from the config tree and the live checkers, so it cannot drift from what
the server enforces: limits are reported by their config keys (``docs/config-schema.md``),
κs by the names verdicts and certificates carry. Any authenticated caller may ask
(``certd.service.access``); nothing in it is secret (the vkey is public, tokens never appear).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import grpc
from pydantic import BaseModel

from certd.authority.checker import Checkers
from certd.clihelp import package_version
from certd.config import CertdConfig
from certd.domains import registry as domains
from certd.ledger.log import Ledger
from certd.service.access import current_principal
from certd.signing.keys import SigningKey, VerifierKey
from certd.v1 import info_pb2, info_pb2_grpc

__all__ = ["InfoServicer", "section_limits", "server_info"]

_UNIT_SUFFIXES = ("_s", "_ms", "_bytes", "_chars", "_digits", "_items")
_COUNTS = frozenset(
    {"processes", "open_files", "queue_limit", "pool_size", "workers", "docker_cpus"}
)


def _is_limit(name: str, value: object) -> bool:
    """A numeric setting that bounds work: ``max_*``, a unit-suffixed size or time, a count."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return name.startswith("max_") or name.endswith(_UNIT_SUFFIXES) or name in _COUNTS


def section_limits(
    prefix: str, section: BaseModel, only: Iterable[str] = (), *, every: bool = False
) -> dict[str, float]:
    """The limits of one config section by their dotted config keys.

    Args:
        prefix: the section's key in the config tree (``code``, ``limits`` …).
        section: the section's values.
        only: restrict to these field names (default: every limit of the section).
        every: every numeric field counts (a section of limits only, such as ``limits``).

    Returns:
        ``{"code.cpu_time_s": 5.0, …}``.
    """
    names = set(only)
    return {
        f"{prefix}.{name}": float(value)
        for name, value in section.model_dump().items()
        if (not names or name in names)
        and (_is_limit(name, value) or (every and _is_limit("max_", value)))
    }


def _domain_limits(cfg: CertdConfig, domain: str) -> dict[str, float]:
    spec = domains.get(domain)
    section = spec.section(cfg) if spec is not None else None
    return section_limits(spec.config_section, section) if spec and section is not None else {}


def _domains(
    cfg: CertdConfig, checkers: Checkers, learned_names: Sequence[str]
) -> list[info_pb2.DomainInfo]:
    out = []
    for name in checkers.domains:
        checker = checkers.for_domain(name)
        learned = [k for k in learned_names if k.startswith(f"{name}.")]
        stage = checker.stage
        out.append(
            info_pb2.DomainInfo(
                name=name,
                verifier=checker.verifier,
                default_kappa=checker.kappa,
                kappas=[*checker.kappas, *learned],
                status="ready" if stage.startswith("ready") else stage,
                limits=_domain_limits(cfg, name),
                isolation=checker.isolation,
            )
        )
    return out


def _service_limits(cfg: CertdConfig, shared: bool) -> dict[str, float]:
    limits = section_limits("limits", cfg.limits, every=True)
    limits |= section_limits("ledger", cfg.ledger, ["max_entry_bytes"])
    limits |= section_limits("acceptance", cfg.acceptance)
    if shared:  # rate limits and idempotency are a cluster's (certd.service.cluster)
        limits |= section_limits("cluster", cfg.cluster)
        limits["cluster.rate_limit_burst"] = float(cfg.cluster.rate_limit_burst)
    return limits


def server_info(
    cfg: CertdConfig,
    checkers: Checkers,
    key: SigningKey,
    ledger: Ledger,
    *,
    services: Sequence[str] = (),
    previous_keys: Sequence[VerifierKey] = (),
    learned_names: Sequence[str] = (),
    shared: bool = False,
) -> info_pb2.ServerInfoResponse:
    """What this server serves, for the caller of the current request.

    Args:
        cfg: the server's config.
        checkers: the domains it runs.
        key: the log's signing key (only its public half is reported).
        ledger: the log (for its latest checkpoint size).
        services: full names of the gRPC services served.
        previous_keys: log keys from before a rotation.
        learned_names: learned κ names served (``LearnedLabeller.names``).
        shared: whether the ledger is a cluster's shared Redis store.

    Returns:
        The reply of ``Info/ServerInfo``.
    """
    principal = current_principal()
    return info_pb2.ServerInfoResponse(
        server_version=package_version(),
        services=list(services),
        domains=_domains(cfg, checkers, learned_names),
        log=info_pb2.LogInfo(
            origin=cfg.ledger.origin,
            key_name=key.name,
            key_id=key.key_id_hex,
            vkey=key.verifier().to_vkey(),
            previous_key_ids=[k.key_id_hex for k in previous_keys],
            store="redis" if shared else "sqlite",
            size=ledger.checkpoint().checkpoint.size,
        ),
        limits=_service_limits(cfg, shared),
        authenticated=cfg.access.enabled,
        tls=cfg.access.tls_cert_file is not None,
        principal=principal.name if principal is not None else "",
        roles=sorted(principal.roles) if principal is not None else [],
    )


class InfoServicer(info_pb2_grpc.InfoServicer):
    """Answers ``ServerInfo`` from the config and the live checkers (``server_info``'s args)."""

    def __init__(
        self,
        cfg: CertdConfig,
        checkers: Checkers,
        key: SigningKey,
        ledger: Ledger,
        *,
        services: Sequence[str],
        previous_keys: Sequence[VerifierKey] = (),
        learned_names: Sequence[str] = (),
        shared: bool = False,
    ) -> None:
        self._cfg, self._checkers, self._key, self._ledger = cfg, checkers, key, ledger
        self._services = tuple(services)
        self._previous = tuple(previous_keys)
        self._learned = tuple(learned_names)
        self._shared = shared

    def ServerInfo(
        self, request: info_pb2.ServerInfoRequest, context: grpc.ServicerContext
    ) -> info_pb2.ServerInfoResponse:
        return server_info(
            self._cfg,
            self._checkers,
            self._key,
            self._ledger,
            services=self._services,
            previous_keys=self._previous,
            learned_names=self._learned,
            shared=self._shared,
        )
