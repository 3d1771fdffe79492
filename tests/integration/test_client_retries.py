"""The client's retries are gRPC's service-config ``retryPolicy``, method by method.

A real gRPC server on 127.0.0.1 fails the first attempts of a call and records each attempt's
metadata: gRPC's retry machinery marks the second and later attempts with
``grpc-previous-rpc-attempts``, which no code of the client writes; the client makes one call.
Keyed methods (VerifyBatch, Certify, CertifyBatch) send one idempotency key with every attempt
and retry ABORTED too; reads retry UNAVAILABLE only; BeginAcceptance and Accept are not retried.
A server behind certd's own interceptors answers an error trailers-only, so it stays retryable.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from certd.errors import StoreError
from certd.service.interceptors import ErrorInterceptor
from certd.service.observability import Metrics, MetricsInterceptor
from certd.v1 import authority_pb2, ledger_pb2, verifier_pb2
from forkgate import CertdClient, CertdUnavailableError, ClientSettings, ServerError
from forkgate.acceptance import begin_acceptance

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
FAST = ClientSettings(timeout_s=20, backoff_s=0.01, backoff_max_s=0.05)


@dataclass
class Flaky:
    """Fails the first ``failures`` attempts of every method with ``code``; records each."""

    failures: int = 0
    code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
    raise_store_error: bool = False  # raise certd's StoreError (for its interceptors) instead
    attempts: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self, name: str, reply: Callable[[Any], Any]) -> Callable[..., Any]:
        def call(request: Any, context: grpc.ServicerContext) -> Any:
            with self.lock:
                self.attempts.append((name, dict(context.invocation_metadata())))
                seen = sum(1 for n, _ in self.attempts if n == name)
            if seen <= self.failures:
                if self.raise_store_error:
                    raise StoreError("the store is restarting")
                context.abort(self.code, f"attempt {seen} fails")
            return reply(request)

        return call

    def of(self, name: str) -> list[dict[str, str]]:
        return [meta for n, meta in self.attempts if n == name]


def _verify_batch(req: verifier_pb2.VerifyBatchRequest) -> verifier_pb2.VerifyBatchResponse:
    return verifier_pb2.VerifyBatchResponse(
        verdicts=[verifier_pb2.Verdict(id=item.id) for item in req.items]
    )


def _handlers(flaky: Flaky) -> list[grpc.GenericRpcHandler]:
    def unary(name: str, req: Any, reply: Callable[[Any], Any]) -> grpc.RpcMethodHandler[Any, Any]:
        return grpc.unary_unary_rpc_method_handler(
            flaky.handler(name, reply),
            request_deserializer=req.FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )

    cert = authority_pb2.Certificate(certificate_id="c" * 64)
    return [
        grpc.method_handlers_generic_handler(
            "certd.v1.Verifier",
            {"VerifyBatch": unary("VerifyBatch", verifier_pb2.VerifyBatchRequest, _verify_batch)},
        ),
        grpc.method_handlers_generic_handler(
            "certd.v1.Authority",
            {
                "Certify": unary(
                    "Certify",
                    authority_pb2.CertifyRequest,
                    lambda _: authority_pb2.CertifyResponse(certificate=cert),
                ),
                "BeginAcceptance": unary(
                    "BeginAcceptance",
                    authority_pb2.BeginAcceptanceRequest,
                    lambda _: authority_pb2.AcceptanceChallenge(evaluation_id="e1"),
                ),
            },
        ),
        grpc.method_handlers_generic_handler(
            "certd.v1.Ledger",
            {
                "GetCheckpoint": unary(
                    "GetCheckpoint",
                    ledger_pb2.GetCheckpointRequest,
                    lambda _: ledger_pb2.SignedCheckpoint(size=7),
                )
            },
        ),
    ]


@pytest.fixture()
def serve() -> Iterator[Callable[..., str]]:
    servers: list[grpc.Server] = []

    def start(flaky: Flaky, *, certd_interceptors: bool = False) -> str:
        interceptors = [MetricsInterceptor(Metrics()), ErrorInterceptor()]
        server = grpc.server(
            futures.ThreadPoolExecutor(4),
            interceptors=interceptors if certd_interceptors else None,
            options=[("grpc.max_receive_message_length", 8 << 20)],
        )
        server.add_generic_rpc_handlers(_handlers(flaky))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(grace=None)


def _previous_attempts(attempts: list[dict[str, str]]) -> list[str | None]:
    return [meta.get("grpc-previous-rpc-attempts") for meta in attempts]


def test_a_read_is_retried_by_the_channel_not_by_a_loop(serve: Callable[..., str]) -> None:
    flaky = Flaky(failures=2)
    with CertdClient(serve(flaky), settings=FAST) as c:
        assert c.checkpoint().size == 7
    # gRPC's retry filter numbers the attempts; a loop in the client would send three calls.
    assert _previous_attempts(flaky.of("GetCheckpoint")) == [None, "1", "2"]
    assert all("idempotency-key" not in meta for meta in flaky.of("GetCheckpoint"))


def test_gives_up_after_max_retries_with_a_typed_error(serve: Callable[..., str]) -> None:
    flaky = Flaky(failures=10)
    settings = ClientSettings(timeout_s=20, max_retries=2, backoff_s=0.01)
    with CertdClient(serve(flaky), settings=settings) as c, pytest.raises(CertdUnavailableError):
        c.checkpoint()
    assert len(flaky.of("GetCheckpoint")) == 3
    with CertdClient(serve(flaky), settings=ClientSettings(max_retries=0)) as c:
        with pytest.raises(CertdUnavailableError):
            c.checkpoint()


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED])
def test_keyed_calls_retry_with_one_key_for_every_attempt(
    serve: Callable[..., str], code: grpc.StatusCode
) -> None:
    flaky = Flaky(failures=2, code=code)
    with CertdClient(serve(flaky), settings=FAST) as c:
        assert [v.id for v in c.verify_batch([(TASK, "<answer>1</answer>", "r1")])] == ["r1"]
        assert c.certify(TASK, "25,-", "(25-5)*4+3").certificate_id == "c" * 64
    for method in ("VerifyBatch", "Certify"):
        attempts = flaky.of(method)
        assert _previous_attempts(attempts) == [None, "1", "2"], method
        keys = {meta["idempotency-key"] for meta in attempts}
        assert len(keys) == 1, (method, keys)  # the twin of an attempt is the same request


def test_a_read_is_not_retried_on_aborted(serve: Callable[..., str]) -> None:
    flaky = Flaky(failures=1, code=grpc.StatusCode.ABORTED)
    with CertdClient(serve(flaky), settings=FAST) as c, pytest.raises(ServerError):
        c.checkpoint()
    assert len(flaky.of("GetCheckpoint")) == 1


def test_a_call_that_is_not_idempotent_is_not_retried(serve: Callable[..., str]) -> None:
    flaky = Flaky(failures=1)
    with CertdClient(serve(flaky), settings=FAST) as c, pytest.raises(CertdUnavailableError):
        begin_acceptance(c, "run", "ckpt", "0" * 64, "target")
    assert len(flaky.of("BeginAcceptance")) == 1


def test_a_request_larger_than_grpcs_default_retry_buffer_is_retried(
    serve: Callable[..., str],
) -> None:
    flaky = Flaky(failures=2)
    big = "x" * (1 << 20)  # 1 MiB: four times gRPC's default per-call retry buffer
    with CertdClient(serve(flaky), settings=FAST) as c:
        assert len(c.verify_batch([(TASK, big, "big")])) == 1
    assert _previous_attempts(flaky.of("VerifyBatch")) == [None, "1", "2"]


def test_certds_interceptors_keep_an_error_retryable(serve: Callable[..., str]) -> None:
    """StoreError → UNAVAILABLE leaves trailers-only (no early headers): gRPC retries it."""
    flaky = Flaky(failures=2, raise_store_error=True)
    with CertdClient(serve(flaky, certd_interceptors=True), settings=FAST) as c:
        assert c.checkpoint().size == 7
    assert _previous_attempts(flaky.of("GetCheckpoint")) == [None, "1", "2"]


def test_more_than_four_retries_is_deprecated_for_wait_for_ready() -> None:
    with pytest.warns(DeprecationWarning, match="wait_for_ready=True"):
        settings = ClientSettings(max_retries=12)
    assert (settings.max_retries, settings.wait_for_ready) == (4, True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ClientSettings(max_retries=4).wait_for_ready is False
    with pytest.raises(ValueError, match="max_retries"):
        ClientSettings(max_retries=-1)
