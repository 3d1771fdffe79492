"""Observability: Prometheus metrics, request ids, JSON logs and health checks.

Example (``certd serve --config c.json`` with ``{"observability": {"metrics_listen":
"127.0.0.1:9464", "log_format": "json"}}``)::

    curl -s 127.0.0.1:9464/metrics | grep certd_rpc_duration_seconds_count

Metrics (one registry per server):

    certd_rpc_requests_total{method, domain, code}      RPCs finished, by status code
    certd_rpc_duration_seconds{method, domain}          latency histogram
    certd_rpc_in_flight{method}                          RPCs running (a queue depth)
    certd_ledger_pending_requests                        appends queued for group commit
    certd_ledger_size                                    entries under the latest checkpoint
    certd_ledger_checkpoint_age_seconds                  since the latest checkpoint
    certd_verify_pool_workers{state}                     configured / alive worker processes
    certd_component_workers{component, state}            math_pool, code_pool, embedder:
                                                         configured / alive (0 until started)
    certd_component_up{component}                        1 unless the component reports a problem
    certd_health_serving                                 1 when the health check passes

Health: the overall status (service ``""`` and every certd service) is NOT_SERVING when the
ledger cannot append, the verify pool has no live worker, or a started component can do none
of its work (e.g. every math worker dead). Each component also has its own health service,
``certd.component.<name>`` (e.g. ``certd.component.math_pool``), NOT_SERVING while it reports
any problem (one math worker of two dead, until its replacement is ready).

``domain`` is the task domain of the request (``countdown``, ``math``, ``code``; ``mixed`` for
a batch of several; ``none`` for ledger reads). Every RPC gets a request id (the client's
``x-request-id`` metadata, else a fresh one), returned as ``certd-request-id`` initial
metadata (with the reply: an error is trailers-only, so a client may retry it, and carries the
id in its trailers) and attached to every log record written while the RPC runs; ``JsonFormatter``
writes one JSON object per line.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from certd.errors import ConfigError
from certd.service.handlers import Behaviour, rewrap
from certd.service.requestid import REQUEST_ID

if TYPE_CHECKING:
    from certd.authority.components import ComponentHealth
    from certd.authority.verifypool import VerifyPools
    from certd.ledger.log import Ledger

__all__ = [
    "COMPONENT_SERVICE_PREFIX",
    "HealthMonitor",
    "JsonFormatter",
    "Metrics",
    "MetricsInterceptor",
    "domain_of",
    "serve_metrics",
]

log = logging.getLogger("certd.observability")

COMPONENT_SERVICE_PREFIX = "certd.component."
"""Health service name of a component: the prefix and its name (``certd.component.math_pool``)."""

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def _task_domain(task: Any) -> str:
    try:
        return str(task.WhichOneof("domain") or "none")
    except (AttributeError, ValueError):
        return "none"


def domain_of(request: Any) -> str:
    """The task domain a request is about, for metric labels.

    Args:
        request: a request message (or an iterator, for client streams).

    Returns:
        ``countdown``/``math``/``code``, ``mixed``, or ``none``.
    """
    if hasattr(request, "task"):
        return _task_domain(request.task)
    items = getattr(request, "items", None)
    if items:
        domains = {_task_domain(getattr(i, "task", None)) for i in items[:64]}
        return domains.pop() if len(domains) == 1 else "mixed"
    return "none"


class Metrics:
    """The server's metrics in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "certd_rpc_requests", "RPCs finished", ["method", "domain", "code"], registry=r
        )
        self.duration = Histogram(
            "certd_rpc_duration_seconds", "RPC latency", ["method", "domain"],
            buckets=_BUCKETS, registry=r,
        )  # fmt: skip
        self.in_flight = Gauge("certd_rpc_in_flight", "RPCs running", ["method"], registry=r)
        self.pending = Gauge(
            "certd_ledger_pending_requests", "appends queued for group commit", registry=r
        )
        self.ledger_size = Gauge(
            "certd_ledger_size", "entries under the latest checkpoint", registry=r
        )
        self.checkpoint_age = Gauge(
            "certd_ledger_checkpoint_age_seconds", "seconds since the latest checkpoint",
            registry=r,
        )  # fmt: skip
        self.pool_workers = Gauge(
            "certd_verify_pool_workers", "verify worker processes", ["state"], registry=r
        )
        self.serving = Gauge("certd_health_serving", "1 when healthy", registry=r)

    def bind(
        self,
        ledger: Ledger,
        pool: VerifyPools,
        workers: int,
        components: Callable[[], list[ComponentHealth]] | None = None,
    ) -> None:
        """Read ledger, pool and component state at each scrape.

        Args:
            ledger: the ledger.
            pool: the verify pools.
            workers: the configured number of pool workers.
            components: reports the checkers' pools and models (math, code, embedder).
        """
        if components is not None:
            self.registry.register(_ComponentCollector(components))
        self.pending.set_function(lambda: ledger.pending_requests)
        self.ledger_size.set_function(lambda: ledger.checkpoint().checkpoint.size)
        self.checkpoint_age.set_function(lambda: max(0.0, time.time() - ledger.checkpoint_time))
        self.pool_workers.labels("configured").set(workers)
        self.pool_workers.labels("alive").set_function(lambda: len(pool.worker_pids()))


class _ComponentCollector(Collector):
    """``certd_component_*`` gauges, read from the checkers at each scrape."""

    def __init__(self, components: Callable[[], list[ComponentHealth]]) -> None:
        self._components = components

    def describe(self) -> Iterable[Metric]:
        return []  # values are read at collect time only

    def collect(self) -> Iterable[Metric]:
        workers = GaugeMetricFamily(
            "certd_component_workers",
            "worker processes (or loaded models) of each pool and model",
            labels=["component", "state"],
        )
        up = GaugeMetricFamily(
            "certd_component_up", "1 unless the component reports a problem", labels=["component"]
        )
        for c in self._components():
            workers.add_metric([c.name, "configured"], c.configured)
            workers.add_metric([c.name, "alive"], c.alive)
            up.add_metric([c.name], 0 if c.problem else 1)
        return [workers, up]


def serve_metrics(metrics: Metrics, listen: str) -> Callable[[], None]:
    """Serve ``/metrics`` over HTTP.

    Args:
        metrics: the metrics.
        listen: ``host:port`` (port 0 picks one).

    Raises:
        ConfigError: the address cannot be bound.

    Returns:
        A function that stops the server; its ``port`` attribute is the bound port.
    """
    host, _, port = listen.rpartition(":")
    try:
        server, thread = start_http_server(int(port), host.strip("[]"), metrics.registry)
    except (OSError, ValueError) as e:
        raise ConfigError(f"metrics: cannot listen on {listen}: {e}") from e

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    stop.port = server.server_port  # type: ignore[attr-defined]  # reported to the caller
    return stop


class MetricsInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]  # generic in stubs
    """Times every RPC, counts it by status code, and gives it a request id."""

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics

    def _begin(self, context: grpc.ServicerContext) -> contextvars.Token[str | None]:
        rid = dict(context.invocation_metadata()).get("x-request-id")
        return REQUEST_ID.set(str(rid)[:64] if rid else uuid.uuid4().hex[:16])

    @staticmethod
    def _send_request_id(context: grpc.ServicerContext) -> None:
        # Sent with the reply, never before: a client's gRPC retries an attempt only while no
        # response headers came (gRFC A6), so an error must leave as a trailers-only response
        # (its request id is in the trailers, certd.service.interceptors).
        try:
            context.send_initial_metadata((("certd-request-id", REQUEST_ID.get() or ""),))
        except ValueError:  # already sent
            pass

    def _end(self, method: str, domain: str, context: grpc.ServicerContext, t0: float) -> None:
        code = context.code()  # type: ignore[attr-defined]  # present at runtime
        name = code.name if isinstance(code, grpc.StatusCode) else "OK"
        self._m.requests.labels(method, domain, name).inc()
        self._m.duration.labels(method, domain).observe(time.perf_counter() - t0)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method.rsplit("/", 1)[-1]
        m = self._m

        def unary(fn: Behaviour, streamed: bool) -> Behaviour:
            def call(request: Any, context: grpc.ServicerContext) -> Any:
                t0 = time.perf_counter()
                domain = "stream" if streamed else domain_of(request)
                token = self._begin(context)
                m.in_flight.labels(method).inc()
                try:
                    reply = fn(request, context)
                    self._send_request_id(context)
                    return reply
                finally:
                    m.in_flight.labels(method).dec()
                    self._end(method, domain, context, t0)
                    REQUEST_ID.reset(token)

            return call

        def stream(fn: Behaviour, streamed: bool) -> Behaviour:
            def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                t0 = time.perf_counter()
                domain = "stream" if streamed else domain_of(request)
                self._begin(context)
                self._send_request_id(context)  # a stream is not retried: headers at once
                m.in_flight.labels(method).inc()
                try:
                    yield from fn(request, context)
                finally:
                    m.in_flight.labels(method).dec()
                    self._end(method, domain, context, t0)

            return call

        return rewrap(handler, unary, stream)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, request id, exception."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = REQUEST_ID.get()
        if rid is not None:
            obj["request_id"] = rid
        if record.exc_info:
            obj["exc"] = self.formatException(record.exc_info)
        return json.dumps(obj, ensure_ascii=False)


class HealthMonitor:
    """Sets the gRPC health status from the ledger's and the verify pool's state."""

    def __init__(
        self,
        servicer: health.HealthServicer,
        services: tuple[str, ...],
        ledger: Ledger,
        pool: VerifyPools,
        workers: int,
        metrics: Metrics,
        interval_s: float,
        *,
        components: Callable[..., list[ComponentHealth]] | None = None,
    ) -> None:
        self._servicer = servicer
        self._components = components
        self._services = services
        self._ledger = ledger
        self._pool = pool
        self._workers = workers
        self._metrics = metrics
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="certd-health", daemon=True)
        self.problem: str | None = None

    def check(self) -> str | None:
        """Run the checks once and publish the status.

        Returns:
            The problem found, or None when serving.
        """
        problem = self._ledger.health()
        if problem is None and self._workers > 0 and not self._pool.worker_pids():
            problem = "verify pool has no live worker"
        for c in self._components(heal=True) if self._components is not None else []:
            self._servicer.set(
                f"{COMPONENT_SERVICE_PREFIX}{c.name}",
                health_pb2.HealthCheckResponse.NOT_SERVING
                if c.problem
                else health_pb2.HealthCheckResponse.SERVING,
            )
            if problem is None and c.fatal:
                problem = c.problem
        if problem != self.problem:
            log.warning("health: %s", problem or "serving again")
        self.problem = problem
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if problem is None
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", *self._services):
            self._servicer.set(name, status)
        self._metrics.serving.set(1 if problem is None else 0)
        return problem

    def start(self) -> None:
        """Check now, then every ``interval_s``."""
        self.check()
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.check()

    def stop(self) -> None:
        """Stop checking."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
