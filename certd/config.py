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

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from certd.errors import ConfigError

__all__ = [
    "AcceptanceConfig",
    "AccessConfig",
    "CertdConfig",
    "ClusterConfig",
    "CodeConfig",
    "CountdownConfig",
    "KappaTaskSetConfig",
    "LearnedKappaConfig",
    "LedgerConfig",
    "MathConfig",
    "ObservabilityConfig",
    "ServiceLimits",
    "TaskSetConfig",
    "describe_validation_error",
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


class MathConfig(_Strict):
    """Math checking: the worker pool, caps, extraction, rewards and κ first-step."""

    enabled: bool = Field(True, description="serve the math domain")
    workers: int = Field(2, ge=1, description="worker processes of the math pool")
    deadline_s: float = Field(2.0, gt=0.0, le=600.0, description="per check, in a worker")
    memory_bytes: int = Field(1 << 30, ge=0, description="RLIMIT_AS of each worker; 0: none")
    warm_start: bool = Field(
        True,
        description="start the pool and load the embedding model in the background at server "
        "start; the health service certd.v1.Verifier/math is NOT_SERVING until both are ready",
    )
    ready_wait_s: float = Field(
        20.0,
        ge=0.0,
        description="how long a math request arriving during warm-up waits for it before "
        "failing with UNAVAILABLE and the warm-up stage",
    )
    prime_grammar: bool = Field(
        True, description="workers fill the LaTeX grammar's prediction cache when idle"
    )
    worker_nice: int = Field(
        5, ge=0, le=19, description="niceness added to each ready worker (serving goes first)"
    )
    max_response_chars: int = Field(1_048_576, ge=1)
    max_gold_chars: int = Field(4_096, ge=1)
    max_answer_chars: int = Field(1_024, ge=1)
    max_brace_depth: int = Field(32, ge=1)
    max_fracs: int = Field(32, ge=1)
    max_tree_nodes: int = Field(2_000, ge=1)
    max_integer_digits: int = Field(2_000, ge=1, le=4_000)
    max_power_digits: int = Field(10_000, ge=1)
    extract_priority: tuple[str, ...] = ("boxed", "phrase", "display", "inline", "plain")
    boxed: str = Field("last", pattern="^(last|first)$")
    first_step: bool = Field(True, description="label math.first-step.v1 (needs the model)")
    embed_threads: int = Field(1, ge=1, description="torch threads for first-step embeddings")
    embed_screen: str = Field(
        "auto",
        pattern="^(auto|on|off)$",
        description="screen first-step embeddings in bfloat16 (auto: where the CPU has it "
        "natively); float32 decides every close call, so labels do not change",
    )
    reward_correct: float = 1.0
    reward_wrong_answer: float = 0.0
    reward_unparsed: float = 0.0


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
    max_workers: int = Field(
        32, ge=2, description="serving threads; at least max_concurrent_rpcs + max_health_in_flight"
    )
    max_concurrent_rpcs: int = Field(
        24, ge=1, description="RPCs in flight (all but Health); more get RESOURCE_EXHAUSTED"
    )
    max_rpcs_per_client: int = Field(
        16, ge=1, description="RPCs in flight per principal (or peer host without auth)"
    )
    stream_idle_timeout_s: float = Field(
        30.0,
        gt=0.0,
        description="a stream waiting this long for the client (no message sent, or replies "
        "not read) ends with DEADLINE_EXCEEDED",
    )
    max_health_watches: int = Field(64, ge=0, description="Health.Watch streams open at once")
    max_health_in_flight: int = Field(
        4, ge=1, description="health calls being answered (threads kept for them); half per client"
    )
    health_idle_timeout_s: float = Field(
        2.0, gt=0.0, description="a health call whose request has not arrived by then is ended"
    )
    shutdown_grace_s: float = Field(10.0, ge=0.0)
    default_page_size: int = Field(100, ge=1, description="list RPCs: items a page by default")
    max_page_size: int = Field(1_000, ge=1, description="list RPCs: larger page sizes shrink to it")

    @model_validator(mode="after")
    def _threads_to_spare(self) -> ServiceLimits:
        need = self.max_concurrent_rpcs + self.max_health_in_flight
        if self.max_workers < need:
            raise ValueError(
                "limits.max_workers: expected at least max_concurrent_rpcs + "
                f"max_health_in_flight ({need}) so health checks always find a thread, "
                f"got {self.max_workers}"
            )
        return self


class CodeConfig(_Strict):
    """The code domain: sandbox backend, warm pool, per-run limits, task sizes, rewards."""

    backend: str = Field("bwrap", pattern="^(bwrap|docker)$")
    pool_size: int = Field(2, ge=1, description="warm sandboxed workers (checks at once)")
    max_runs_per_worker: int = Field(200, ge=1, description="checks before a worker is replaced")
    queue_limit: int = Field(1024, ge=0, description="checks waiting for a worker; more = busy")
    acquire_timeout_s: float = Field(300.0, gt=0)
    cpu_time_s: float = Field(5.0, gt=0, description="per test run")
    wall_time_s: float = Field(10.0, gt=0, description="per test run")
    memory_bytes: int = Field(512 << 20, ge=16 << 20, description="per process (RLIMIT_AS)")
    processes: int = Field(32, ge=1)
    output_bytes: int = Field(1 << 20, ge=1024, description="stdout/stderr kept per run")
    file_size_bytes: int = Field(16 << 20, ge=1024)
    open_files: int = Field(64, ge=8)
    workdir_bytes: int = Field(64 << 20, ge=1 << 20, description="tmpfs /work and /tmp size")
    compile_cpu_time_s: float = Field(20.0, gt=0)
    compile_wall_time_s: float = Field(30.0, gt=0)
    compile_memory_bytes: int = Field(1 << 30, ge=64 << 20)
    compile_output_bytes: int = Field(16 << 20, ge=1 << 20, description="largest binary")
    docker_image: str = Field("forkgate/sandbox-runner:1", min_length=1)
    docker_runtime: str | None = Field(None, description="OCI runtime, e.g. runsc (gVisor)")
    docker_cpus: float = Field(1.0, gt=0)
    max_program_bytes: int = Field(256 << 10, ge=1)
    max_cases: int = Field(256, ge=1)
    max_case_bytes: int = Field(1 << 20, ge=1)
    max_response_bytes: int = Field(512 << 10, ge=1)
    extract: str = Field("last", pattern="^(last|first)$", description="which fenced block")
    reward_correct: float = 1.0
    reward_wrong: float = 0.0
    partial_reward: bool = Field(False, description="stdin/stdout: reward = pass fraction")


class TaskSetConfig(_Strict):
    """A capability registered at start-up (see ``Authority.RegisterTaskSet`` for the RPC).

    ``tasks`` are task objects (docs/formats.md §0), e.g.
    ``{"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}``; the older
    protobuf-JSON ``{"countdown": {…}}`` is read with a DeprecationWarning.
    """

    name: str = Field(min_length=1, max_length=128)
    tasks: tuple[dict[str, object], ...] = Field(min_length=1)
    k: int = Field(8, ge=1, description="samples per prompt (the budget of best@k)")
    prompts: int = Field(0, ge=0, description="prompts drawn per evaluation; 0: all")
    tolerance_best_at_k: float = Field(0.05, ge=0.0, le=1.0)
    tolerance_pass_at_1: float = Field(0.10, ge=0.0, le=1.0)
    min_improvement: float = Field(0.0, ge=0.0, le=1.0, description="target pass@1 rise")
    route_kappa: str = Field("math.route.v1", description="κ of the routes; '' domain default")
    route_field: str = Field("", description="label field used as the route; '' the value")


class AcceptanceConfig(_Strict):
    """Acceptance certificates: registered capabilities and the limits of an evaluation."""

    task_sets: tuple[TaskSetConfig, ...] = ()
    max_task_sets: int = Field(64, ge=1)
    max_tasks_per_set: int = Field(10_000, ge=1)
    max_samples_per_accept: int = Field(100_000, ge=1)
    max_open_evaluations: int = Field(256, ge=1)
    evaluation_ttl_s: float = Field(24 * 3600.0, gt=0.0, description="challenge lifetime")
    refuse_within_noise: bool = Field(
        True,
        description="refuse a fall past tolerance even when its interval contains 0; false "
        "lets such a fall pass as sampling noise",
    )
    bootstrap_resamples: int = Field(2_000, ge=100)
    interval_level: float = Field(0.95, gt=0.5, lt=1.0)


class KappaTaskSetConfig(_Strict):
    """Which κ defines the families of a set of tasks (``learned_kappa.task_sets``).

    ``tasks`` are task objects ``{"domain": …, "task": {…}}``, as in ``TaskSetConfig``.
    """

    name: str = Field(min_length=1, max_length=128)
    kappa: str = Field(
        "learned",
        pattern=r"^(learned|[a-z]+\.[a-z-]+\.v[0-9]+)$",
        description="'learned' (certd.kappa) or a κ base name such as math.first-step.v1: "
        "the default κ of Certify for these tasks",
    )
    tasks: tuple[dict[str, object], ...] = Field(min_length=1)
    distance_threshold: float | None = Field(
        None, gt=0.0, lt=2.0, description="the learned κ's threshold here; None: the section's"
    )


class LearnedKappaConfig(_Strict):
    """The learned κ (``<domain>.learned.v1``, docs/kappa-calibration.md): its clustering
    parameters and the task sets that use it. With no task set choosing ``learned`` it is
    not served (and its model is not loaded)."""

    task_sets: tuple[KappaTaskSetConfig, ...] = ()
    distance_threshold: float = Field(
        0.4,
        gt=0.0,
        lt=2.0,
        description="UPGMA stop, in cosine distance (part of the κ name); 0.4 is what the "
        "math corpus's calibration chose (docs/kappa-calibration.md)",
    )
    min_fit_steps: int = Field(4, ge=1, description="fewest first steps a fit accepts")
    max_fit_steps: int = Field(256, ge=1, le=4_096, description="most first steps per fit")
    max_distinct: int = Field(256, ge=1, le=4_096, description="most distinct steps per fit")
    max_clusters: int = Field(64, ge=1, description="most clusters a record may hold")
    max_step_chars: int = Field(300, ge=1, description="longest step accepted in a fit")
    max_models: int = Field(4_096, ge=1, description="fitted models kept in memory")
    embed_threads: int = Field(1, ge=1, description="torch threads for its embeddings")


class CertdConfig(_Strict):
    """The whole configuration tree."""

    data_dir: Path = Path("certd-data")
    listen: str = "127.0.0.1:50051"
    key_name: str = Field("forkgate.local/certd", min_length=1)
    countdown: CountdownConfig = CountdownConfig()
    math: MathConfig = MathConfig()
    ledger: LedgerConfig = LedgerConfig()
    limits: ServiceLimits = ServiceLimits()
    code: CodeConfig = CodeConfig()
    acceptance: AcceptanceConfig = AcceptanceConfig()
    cluster: ClusterConfig = ClusterConfig()
    access: AccessConfig = AccessConfig()
    observability: ObservabilityConfig = ObservabilityConfig()
    learned_kappa: LearnedKappaConfig = LearnedKappaConfig()

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
        where = f"config {path}" if path is not None else "config"
        raise ConfigError(f"{where}: {describe_validation_error(e)}") from e


def _key_paths(model: type[BaseModel], prefix: str = "") -> dict[str, list[str]]:
    """Every key of the config tree by its bare name: ``{"workers": ["math.workers", …]}``."""
    out: dict[str, list[str]] = {}
    for name, info in model.model_fields.items():
        out.setdefault(name, []).append(prefix + name)
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            for key, paths in _key_paths(sub, f"{prefix}{name}.").items():
                out.setdefault(key, []).extend(paths)
    return out


def describe_validation_error(error: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line for a config validation error: each key's path and problem, no pydantic URLs.

    A key at the wrong level says where it belongs.

    Example:
        >>> try:
        ...     CertdConfig.model_validate({"workers": 2})
        ... except ValidationError as e:
        ...     print(describe_validation_error(e))
        unknown key 'workers' (did you mean 'math.workers'?)
    """
    known = _key_paths(model or CertdConfig)
    parts = []
    for err in error.errors(include_url=False):
        path = ".".join(str(x) for x in err["loc"])
        if err["type"] == "extra_forbidden":
            elsewhere = [p for p in known.get(str(err["loc"][-1]), []) if p != path]
            hint = (
                f" (did you mean {' or '.join(repr(p) for p in elsewhere[:3])}?)"
                if elsewhere
                else ""
            )
            parts.append(f"unknown key {path!r}{hint}")
        else:
            parts.append(f"{path or 'config'}: {err['msg']}")
    return "; ".join(parts)
