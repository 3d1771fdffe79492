"""certd's configuration: one typed tree, loaded once, passed down.

Example:
    >>> cfg = CertdConfig()
    >>> cfg.listen, cfg.data_dir.name
    ('127.0.0.1:50051', 'certd-data')
    >>> cfg = CertdConfig.model_validate({"ledger": {"group_commit_max_entries": 64}})
    >>> cfg.ledger.group_commit_max_entries
    64

Every limit has its unit in its name. ``certd serve --config FILE.json`` loads a JSON file of
the same shape; command-line flags override it.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from certd.errors import ConfigError

__all__ = [
    "AccessConfig",
    "CertdConfig",
    "ClusterConfig",
    "CountdownConfig",
    "LedgerConfig",
    "ObservabilityConfig",
    "ServiceLimits",
    "load_config",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CountdownConfig(_Strict):
    """Countdown verification limits and reward shaping."""

    max_response_chars: int = Field(65_536, ge=1)
    max_expression_chars: int = Field(1_024, ge=1)
    max_depth: int = Field(64, ge=1, description="parenthesis nesting")
    max_literal_digits: int = Field(9, ge=1)
    max_numbers: int = Field(8, ge=1, le=8)
    max_tokens: int = Field(512, ge=1)
    max_enumerate_numbers: int = Field(6, ge=1, le=7)
    max_enumerate_solutions: int = Field(200_000, ge=1)
    verify_workers: int = Field(2, ge=0, description="worker processes for large batches")
    verify_pool_min_batch: int = Field(256, ge=1, description="smaller batches run in process")
    reward_correct: float = 1.0
    reward_wrong_answer: float = 0.1
    reward_invalid: float = 0.0


class LedgerConfig(_Strict):
    """Ledger store and group commit."""

    origin: str = Field("forkgate.local/certd", min_length=1)
    sqlite_synchronous: str = Field("FULL", pattern="^(FULL|NORMAL|EXTRA)$")
    group_commit_max_entries: int = Field(1_024, ge=1)
    group_commit_max_delay_ms: float = Field(2.0, ge=0.0)
    max_entry_bytes: int = Field(1 << 20, ge=1024)


class ClusterConfig(_Strict):
    """A certd replica of a cluster: the shared Redis ledger, idempotency and rate limits.

    With ``ledger_url`` unset certd runs embedded (SQLite in ``data_dir``) and the rest of
    this section is unused. See ``docs/operating-a-cluster.md``.
    """

    ledger_url: str | None = Field(None, pattern="^(redis|rediss|unix)://")
    redis_prefix: str = Field("certd", pattern="^[A-Za-z0-9_.-]+$")
    redis_appendfsync: str = Field("always", pattern="^(always|everysec|no|any)$")
    redis_timeout_s: float = Field(10.0, gt=0.0)
    checkpoint_refresh_ms: float = Field(50.0, ge=0.0)
    idempotency_ttl_s: int = Field(86_400, ge=1, description="how long a reply is kept")
    idempotency_wait_s: float = Field(30.0, gt=0.0, description="wait for a concurrent twin")
    idempotency_claim_s: float = Field(
        10.0, gt=0.0, description="a running request's claim; renewed while it runs"
    )
    rate_limit_per_s: float = Field(0.0, ge=0.0, description="per client; 0 disables")
    rate_limit_burst: int = Field(100, ge=1)


class AccessConfig(_Strict):
    """TLS, mutual TLS, bearer tokens, roles and log-key rotation.

    Unset (the default), certd serves plaintext and unauthenticated, which it allows on
    loopback addresses only. Roles: ``verify`` (Verifier RPCs, EnumerateFamilies),
    ``certify`` (Certify, CertifyBatch, GetCertificate, GetForkTree), ``audit`` (the
    read-only Ledger service). See ``docs/operating-a-cluster.md``.
    """

    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    client_ca_file: Path | None = Field(None, description="mTLS: require client certs from it")
    client_roles: dict[str, list[str]] = Field(
        default_factory=dict, description="mTLS: client certificate common name -> roles"
    )
    tokens_file: Path | None = Field(
        None, description='JSON {"tokens": [{"sha256", "principal", "roles"}]}'
    )
    allow_plaintext_remote: bool = Field(
        False, description="serve without TLS or auth on a non-loopback address"
    )
    previous_log_keys: list[str] = Field(
        default_factory=list, description="vkeys (or files) of log keys used before rotation"
    )

    @property
    def enabled(self) -> bool:
        """Whether requests are authenticated."""
        return self.tokens_file is not None or self.client_ca_file is not None


class ObservabilityConfig(_Strict):
    """Prometheus metrics, log format and health checks."""

    metrics_listen: str | None = Field(
        None, description="host:port of the Prometheus /metrics endpoint (loopback), or None"
    )
    log_format: str = Field("text", pattern="^(text|json)$")
    health_interval_s: float = Field(2.0, gt=0.0, description="ledger and pool checks")


class ServiceLimits(_Strict):
    """Limits the gRPC layer enforces before any work starts."""

    max_message_bytes: int = Field(64 << 20, ge=1024)
    max_batch_items: int = Field(10_000, ge=1)
    max_certify_batch_items: int = Field(5_000, ge=1)
    max_entries_per_request: int = Field(1_000, ge=1)
    stream_receipt_every: int = Field(256, ge=1, description="verdicts per VerifyStream receipt")
    max_workers: int = Field(16, ge=1)
    shutdown_grace_s: float = Field(10.0, ge=0.0)


class CertdConfig(_Strict):
    """The whole configuration tree."""

    data_dir: Path = Path("certd-data")
    listen: str = "127.0.0.1:50051"
    key_name: str = Field("forkgate.local/certd", min_length=1)
    countdown: CountdownConfig = CountdownConfig()
    ledger: LedgerConfig = LedgerConfig()
    limits: ServiceLimits = ServiceLimits()
    cluster: ClusterConfig = ClusterConfig()
    access: AccessConfig = AccessConfig()
    observability: ObservabilityConfig = ObservabilityConfig()

    @property
    def key_path(self) -> Path:
        """The signing key file inside the data dir."""
        return self.data_dir / "signing.key"

    @property
    def ledger_path(self) -> Path:
        """The SQLite ledger file inside the data dir."""
        return self.data_dir / "ledger.sqlite"


def load_config(path: Path | None = None, **overrides: object) -> CertdConfig:
    """Load the config from an optional JSON file, then apply top-level overrides.

    Args:
        path: a JSON file shaped like ``CertdConfig``; None for the defaults.
        overrides: top-level fields to replace (``None`` values are ignored).

    Raises:
        ConfigError: the file cannot be read or does not validate.

    Returns:
        The validated configuration.
    """
    data: dict[str, object] = {}
    if path is not None:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot read config {path}: {e}") from e
        if not isinstance(loaded, dict):
            raise ConfigError(f"config {path}: expected a JSON object, got {type(loaded).__name__}")
        data.update(loaded)
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return CertdConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"invalid config: {e}") from e
