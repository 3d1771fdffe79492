"""Assembles certd: data dir, key, ledger, authority, the gRPC server and its lifecycle.

Example::

    server = CertdServer(CertdConfig(data_dir=Path("/tmp/certd"), listen="127.0.0.1:0"))
    port = server.start()
    ...
    server.stop()   # NOT_SERVING first, drain, flush the ledger, close

Graceful shutdown loses no acknowledged certificate: a reply leaves only after its ledger
entry is durable, and stop() drains in-flight RPCs before it closes the ledger.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from certd.authority.acceptances import Acceptances
from certd.authority.checker import Checkers
from certd.authority.dispatch import VerifyDispatch
from certd.authority.feasibility import Authority
from certd.authority.key_rotation import check_start_key
from certd.authority.quota import LedgerQuota
from certd.authority.receipts import ReceiptIssuer
from certd.authority.verification import Verification
from certd.authority.verifypool import VerifyPools
from certd.config import CertdConfig
from certd.domains import registry as domains
from certd.errors import ConfigError
from certd.ledger.log import GroupCommitConfig, Ledger
from certd.ledger.store import LedgerStore, StoreLimits, StoreOptions, open_store
from certd.service.acceptance_rpcs import register_configured
from certd.service.access import (
    AccessInterceptor,
    check_listen,
    refuse_readable_by_others,
    server_credentials,
)
from certd.service.admission import Admission, AdmissionExecutor, AdmissionInterceptor
from certd.service.authority import AuthorityServicer
from certd.service.health import GuardedHealth
from certd.service.info import InfoServicer
from certd.service.interceptors import ErrorInterceptor
from certd.service.ledger import LedgerServicer
from certd.service.observability import (
    HealthMonitor,
    Metrics,
    MetricsInterceptor,
    serve_metrics,
)
from certd.service.peers import listen_address
from certd.service.taskcache import TaskCache
from certd.service.verifier import VerifierServicer
from certd.signing.keys import SigningKey, VerifierKey, load_signing_key, save_signing_key
from certd.v1 import (
    authority_pb2,
    authority_pb2_grpc,
    info_pb2,
    info_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
    verifier_pb2,
    verifier_pb2_grpc,
)

__all__ = [
    "CertdServer",
    "SERVICE_NAMES",
    "domain_health",
    "ensure_key",
    "open_ledger",
]

log = logging.getLogger("certd.server")

SERVICE_NAMES = (
    verifier_pb2.DESCRIPTOR.services_by_name["Verifier"].full_name,
    authority_pb2.DESCRIPTOR.services_by_name["Authority"].full_name,
    ledger_pb2.DESCRIPTOR.services_by_name["Ledger"].full_name,
    info_pb2.DESCRIPTOR.services_by_name["Info"].full_name,
)


def domain_health(domain: str) -> str:
    """The health service of a domain that warms up (``DomainSpec.warms_up``; math's pool and
    embedding model): NOT_SERVING until it is ready, e.g. ``forkgate.v1.Verifier/math``."""
    return f"{SERVICE_NAMES[0]}/{domain}"


def ensure_key(path: Path, name: str) -> SigningKey:
    """Load the signing key at ``path``, creating it (and its ``.pub`` vkey) on first start.

    Raises:
        SigningError: the file exists but holds no valid key.
        ConfigError: the key's name differs from ``name``, or other users (not the owner
            or its group) may access the file.
    """
    if path.exists():
        refuse_readable_by_others(path, "signing key")
        key = load_signing_key(path)
        if key.name != name:
            raise ConfigError(f"signing key name: expected {name!r}, got {key.name!r} in {path}")
    else:
        key = SigningKey.generate(name)
        save_signing_key(path, key)
    pub = path.with_suffix(".pub")
    vkey = key.verifier().to_vkey() + "\n"
    if not pub.exists() or pub.read_text() != vkey:
        pub.write_text(vkey)
    return key


def _vkey(source: str) -> VerifierKey:
    """A verifier key from a vkey string or a file holding one."""
    path = Path(source)
    try:
        text = path.read_text().strip() if path.is_file() else source.strip()
    except OSError as e:
        raise ConfigError(f"cannot read the log key {source}: {e}") from e
    return VerifierKey.from_vkey(text)


def _open_store(cfg: CertdConfig) -> LedgerStore:
    """The ledger store the config names: ``cluster.ledger_url``, else SQLite in the data dir.

    Raises:
        ConfigError: the URL or the backend's settings are not valid.
        StoreError: the store cannot be opened.
    """
    c = cfg.cluster
    options = StoreOptions(
        limits=StoreLimits(max_entry_bytes=cfg.ledger.max_entry_bytes),
        sqlite_synchronous=cfg.ledger.sqlite_synchronous,
        redis_prefix=c.redis_prefix,
        redis_appendfsync=c.redis_appendfsync,
        redis_timeout_s=c.redis_timeout_s,
        postgres_schema=c.postgres_schema,
        postgres_connect_timeout_s=c.postgres_connect_timeout_s,
        postgres_require_sync_standby=c.postgres_require_sync_standby,
    )
    return open_store(c.ledger_url or str(cfg.ledger_path), options)


def _open_ledger(
    cfg: CertdConfig, store: LedgerStore, key: SigningKey, previous_keys: list[VerifierKey]
) -> Ledger:
    """The ledger over ``store``; the store is closed when the ledger cannot be opened.

    A replica of a shared (Redis) ledger remembers the last checkpoint it saw in the data
    dir, so a store that no longer extends it is refused at the next start.
    """
    remembered = None
    mark = cfg.data_dir / "ledger.verified"
    if store.shared:
        remembered = cfg.data_dir / f"checkpoint-{cfg.cluster.redis_prefix}.note"
        mark = cfg.data_dir / f"verified-{cfg.cluster.redis_prefix}.json"
    try:
        return Ledger(
            store,
            key,
            cfg.ledger.origin,
            config=GroupCommitConfig(
                max_batch_entries=cfg.ledger.group_commit_max_entries,
                max_delay_s=cfg.ledger.group_commit_max_delay_ms / 1e3,
            ),
            checkpoint_file=remembered,
            verified_mark=mark,
            previous_keys=previous_keys,
            refresh_interval_s=cfg.cluster.checkpoint_refresh_ms / 1e3,
        )
    except BaseException:
        store.close()
        raise


def open_ledger(cfg: CertdConfig, key: SigningKey) -> Ledger:
    """The ledger the config names, opened as ``certd serve`` opens it (for offline operator
    verbs such as ``certd kappa-fit``; close it when done).

    Raises:
        ConfigError: a previous log key or the Redis settings are not valid.
        StoreError: the store cannot be opened.
    """
    previous_keys = [_vkey(v) for v in cfg.access.previous_log_keys]
    cfg.data_dir.mkdir(parents=True, exist_ok=True)
    return _open_ledger(cfg, _open_store(cfg), key, previous_keys)


class CertdServer:
    """A running certd: the embedded SQLite ledger, or one replica of a Redis-backed cluster."""

    def __init__(self, cfg: CertdConfig) -> None:
        self.cfg = cfg
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.key = ensure_key(cfg.key_path, cfg.key_name)
        previous_keys = [_vkey(v) for v in cfg.access.previous_log_keys]
        self.store = _open_store(cfg)
        self.ledger = _open_ledger(cfg, self.store, self.key, previous_keys)
        try:  # a key the log never rotated onto does not sign (certd.authority.key_rotation)
            check_start_key(self.ledger, self.key, previous_keys)
        except BaseException:
            self.ledger.close()
            raise
        self.checkers = Checkers(cfg)
        learned = None
        if cfg.learned_kappa.task_sets:  # the learned κ loads numpy/sympy only when chosen
            from certd.authority.labeller import LearnedLabeller

            learned = LearnedLabeller.from_config(cfg)
        self.authority = Authority(self.checkers, self.ledger, self.key, learned=learned)
        self.acceptances = Acceptances(self.checkers, self.ledger, self.key, cfg.acceptance)
        self.tasks = TaskCache(cfg)  # one conversion per distinct task, whichever RPC brings it
        register_configured(self.acceptances, cfg, self.tasks)
        self.pools = VerifyPools.from_config(self.checkers, cfg)
        for pool in self.pools:  # a CertifyBatch's signed counts, in parallel
            self.authority.count_in(pool)
        self.verification = Verification(
            VerifyDispatch(self.checkers, *self.pools),
            ReceiptIssuer(self.ledger, self.key, time.time),
        )
        self.admission = Admission(cfg.limits)
        self._access = AccessInterceptor(cfg.access) if cfg.access.enabled else None
        self.health = GuardedHealth(
            cfg.limits.max_health_watches,
            self._access.authenticate if self._access is not None else None,
        )
        self.metrics = Metrics()
        self.metrics.bind(self.ledger, self.pools, self.pools.workers, self.checkers.components)
        self.monitor = HealthMonitor(
            self.health,
            SERVICE_NAMES,
            self.ledger,
            self.pools,
            self.pools.workers,
            self.metrics,
            cfg.observability.health_interval_s,
            components=self.checkers.components,
        )
        self.metrics_port = 0
        self._stop_metrics: Callable[[], None] | None = None
        self._server = self._grpc_server()
        learned_names = learned.names if learned is not None else ()
        self._add_servicers(previous_keys, learned_names)
        self.port = 0
        self._stopped = threading.Event()

    def _grpc_server(self) -> grpc.Server:
        """The gRPC server: admission-bounded executor, the interceptor chain, message caps."""
        authenticate = self._access.authenticate if self._access is not None else None
        return grpc.server(
            AdmissionExecutor(self.admission, self.cfg.limits.max_workers, authenticate),
            interceptors=self._interceptors(),
            options=[
                ("grpc.max_receive_message_length", self.cfg.limits.max_message_bytes),
                ("grpc.max_send_message_length", self.cfg.limits.max_message_bytes),
                ("grpc.so_reuseport", 0),
            ],
        )

    def _add_servicers(
        self, previous_keys: Sequence[VerifierKey], learned_names: Sequence[str]
    ) -> None:
        """Register the four services, health and reflection on the gRPC server."""
        cfg, server = self.cfg, self._server
        quota = LedgerQuota.from_config(cfg.limits)  # one count per principal for both services
        tasks = self.tasks
        verifier_pb2_grpc.add_VerifierServicer_to_server(
            VerifierServicer(cfg, self.verification, quota, tasks), server
        )
        authority_pb2_grpc.add_AuthorityServicer_to_server(
            AuthorityServicer(cfg, self.authority, self.acceptances, quota, tasks), server
        )
        ledger_pb2_grpc.add_LedgerServicer_to_server(LedgerServicer(cfg, self.ledger), server)
        info = InfoServicer(
            cfg,
            self.checkers,
            self.key,
            self.ledger,
            services=SERVICE_NAMES,
            previous_keys=previous_keys,
            learned_names=learned_names,
            shared=self.store.shared,
        )
        info_pb2_grpc.add_InfoServicer_to_server(info, server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )

    def _interceptors(self) -> list[grpc.ServerInterceptor]:  # type: ignore[type-arg]  # stubs
        chain: list[grpc.ServerInterceptor] = [  # type: ignore[type-arg]  # generic in stubs
            MetricsInterceptor(self.metrics),
            ErrorInterceptor(),
        ]
        if self._access is not None:
            chain.append(self._access)
        chain.append(AdmissionInterceptor(self.admission))  # after auth: knows the principal
        if self.store.shared:
            from certd.service.cluster import ClusterInterceptor
            from certd.service.replycheck import ReplayCheck

            check = ReplayCheck(self.store)
            chain.append(ClusterInterceptor.from_config(self.cfg.cluster, check_reply=check))
        return chain

    def start(self) -> int:
        """Bind and start serving; return the bound port.

        Raises:
            ConfigError: the listen address cannot be bound.
        """
        check_listen(self.cfg.listen, self.cfg.access)
        creds = server_credentials(self.cfg.access)
        try:
            if creds is None:
                self.port = self._server.add_insecure_port(self.cfg.listen)
            else:
                self.port = self._server.add_secure_port(self.cfg.listen, creds)
        except RuntimeError as e:
            raise ConfigError(f"cannot listen on {self.cfg.listen}: {e}") from e
        if self.port == 0:
            raise ConfigError(f"cannot listen on {self.cfg.listen}")
        self.admission.server_port = self.port
        self.admission.server_host = listen_address(self.cfg.listen)
        if self.cfg.observability.metrics_listen is not None:
            self._stop_metrics = serve_metrics(self.metrics, self.cfg.observability.metrics_listen)
            self.metrics_port = int(self._stop_metrics.port)  # type: ignore[attr-defined]
        self._server.start()
        self.admission.start()
        self.monitor.start()  # SERVING while the ledger and the pool are healthy
        self._watch_readiness()
        log.info("certd serving on %s (port %d)", self.cfg.listen, self.port)
        return self.port

    def _watch_readiness(self) -> None:
        """Each served domain that warms up is NOT_SERVING (``domain_health``) until it is ready."""
        for spec in domains.specs():
            if spec.warms_up and spec.name in self.checkers.domains:
                self._watch(spec.name)

    def _watch(self, domain: str) -> None:
        status = health_pb2.HealthCheckResponse
        service = domain_health(domain)
        self.health.set(service, status.NOT_SERVING)

        def ready() -> None:
            if not self._stopped.is_set():
                self.health.set(service, status.SERVING)
                log.info("%s domain ready: health %s SERVING", domain, service)

        self.checkers.for_domain(domain).on_ready(ready)

    def stop(self, grace_s: float | None = None) -> None:
        """Graceful shutdown: NOT_SERVING, drain in-flight RPCs, flush and close the ledger."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.monitor.stop()
        self.health.enter_graceful_shutdown()
        grace = self.cfg.limits.shutdown_grace_s if grace_s is None else grace_s
        self._server.stop(grace).wait()
        self.admission.stop()
        self.pools.close()
        self.checkers.close()
        self.ledger.close()  # commits what is queued, then closes the store
        if self._stop_metrics is not None:
            self._stop_metrics()
        log.info("certd stopped")

    def wait(self) -> None:
        """Block until the server terminates."""
        self._server.wait_for_termination()
