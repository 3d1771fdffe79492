"""Issue 14, reproduction 5: idle streams and unauthenticated watches cannot stop the server.

Real certd on 127.0.0.1, real gRPC channels. A hostile client opens more idle streams than
the server has threads; it gets at most half the slots (issue 29: without authentication the
principal is the peer's process, however many connections it opens), honest calls from another
process get a verdict at once, the
idle calls are ended after ``first_message_timeout_s``, and health answers throughout.

Each channel here has its own connection (``grpc.use_local_subchannel_pool``): two channels
of one process would otherwise share one TCP connection, as the calls of one client do.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from server_helpers import LAZY_MATH, NO_POOL
from test_access import pki  # noqa: F401 - the module's certificate fixture

from certd.config import AccessConfig, CertdConfig, ServiceLimits
from certd.errors import ServerBusyError
from certd.service.admission import Admission
from certd.service.peers import principal_of_peer, user_of
from certd.service.server import CertdServer
from certd.v1 import tasks_pb2, verifier_pb2, verifier_pb2_grpc

TASK = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83))
HONEST = verifier_pb2.VerifyRequest(id="honest", task=TASK, response="(25-5)*4+3")
IDLE_S = 3.0
FIRST_S = 2.0
HALF = 6  # of max_concurrent_rpcs 12: what one principal may hold


def _limits(**kw: object) -> ServiceLimits:
    base: dict[str, object] = {
        "max_workers": 16,  # the thread count of the reproduction
        "max_concurrent_rpcs": 12,
        "max_rpcs_per_client": 12,
        "stream_idle_timeout_s": IDLE_S,
        "first_message_timeout_s": FIRST_S,
        "max_health_watches": 8,
        # Two processes of this (one) user are two principals here; the default, one per
        # user, is tested across users in test_fair_admission.py.
        "local_principal": "process",
    }
    base.update(kw)
    return ServiceLimits.model_validate(base)


def _start(tmp_path: Path, **kw: object) -> CertdServer:
    server = CertdServer(
        CertdConfig(
            data_dir=tmp_path / "d",
            listen="127.0.0.1:0",
            limits=_limits(),
            math=LAZY_MATH,
            countdown=NO_POOL,
            **kw,
        )  # type: ignore[arg-type]
    )
    server.start()
    return server


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[CertdServer]:
    s = _start(tmp_path)
    try:
        yield s
    finally:
        s.stop(grace_s=0)


def _channel(address: str) -> grpc.Channel:
    """A channel with a connection of its own (another principal without authentication)."""
    return grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])


def _silent(stop: threading.Event) -> Iterator[verifier_pb2.VerifyRequest]:
    """A client stream that sends nothing until ``stop``."""
    stop.wait(60)
    return
    yield  # a generator


def _health(channel: grpc.Channel) -> int:
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    return int(reply.status)


def _settle(admission: object, want: int, within_s: float = 20.0) -> int:
    """Wait until ``want`` calls are in flight (a loaded machine may take a while to deliver
    them), then return the count; no timing is asserted, only the count reached."""
    deadline = time.monotonic() + within_s
    while admission.in_flight != want and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.05)
    return int(admission.in_flight)  # type: ignore[attr-defined]


HOSTILE = """
import json, sys, threading, time
import grpc
from certd.v1 import verifier_pb2_grpc

own = [("grpc.use_local_subchannel_pool", 1)]  # sixteen connections of one process
channels = [grpc.insecure_channel(sys.argv[1], options=own) for _ in range(16)]
codes = []

def silent():
    time.sleep(60)
    return
    yield

def one(ch):
    try:
        list(verifier_pb2_grpc.VerifierStub(ch).VerifyStream(silent(), timeout=60))
        codes.append("OK")
    except grpc.RpcError as e:
        codes.append(e.code().name)

threads = [threading.Thread(target=one, args=(ch,)) for ch in channels]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(sorted(codes)), flush=True)
"""


def test_sixteen_idle_verify_streams_do_not_stop_the_server(server: CertdServer) -> None:
    """One process, sixteen connections, one idle stream each: one principal, half the threads,
    no verification slot; another process (this one) is served meanwhile."""
    address = f"127.0.0.1:{server.port}"
    hostile = subprocess.Popen(
        [sys.executable, "-c", HOSTILE, address], stdout=subprocess.PIPE, text=True
    )
    try:
        assert _settle(server.admission, HALF) == HALF  # the streams are open and idle
        assert server.admission.verifying == 0  # none has sent its first message
        with _channel(address) as honest:
            verifier = verifier_pb2_grpc.VerifierStub(honest)
            assert _health(honest) == health_pb2.HealthCheckResponse.SERVING
            assert verifier.Verify(HONEST, timeout=5).verdict.status == tasks_pb2.CORRECT
            out, _ = hostile.communicate(timeout=FIRST_S + 30)
            # The 10 over its half were refused; the 6 admitted were ended as idle.
            assert json.loads(out) == ["DEADLINE_EXCEEDED"] * HALF + ["RESOURCE_EXHAUSTED"] * (
                16 - HALF
            )
            assert verifier.Verify(HONEST, timeout=10).verdict.status == tasks_pb2.CORRECT
            assert _health(honest) == health_pb2.HealthCheckResponse.SERVING
    finally:
        hostile.kill()
        hostile.wait()
    assert _settle(server.admission, 0) == 0


def test_a_call_takes_a_verification_slot_only_with_its_first_message() -> None:
    """Pending calls hold threads, not verification slots; the slot bound bites at promotion."""
    limits = _limits(max_workers=24, max_rpcs_per_client=4)  # 20 RPC threads, 10 per principal
    admission = Admission(limits)
    pending = [admission.enter("a", None) for _ in range(10)]
    assert admission.in_flight == 10 and admission.verifying == 0
    with pytest.raises(ServerBusyError, match="in flight"):
        admission.enter("a", None)  # half the threads
    for t in pending[:4]:
        admission.promote(t)
    assert admission.verifying == 4
    with pytest.raises(ServerBusyError, match="verifying"):
        admission.promote(pending[4])  # its 4 verification slots are taken
    other = admission.enter("b", None)
    admission.promote(other)  # another principal still verifies
    for t in [*pending, other]:
        admission.leave(t)
    assert admission.in_flight == 0 and admission.verifying == 0


def test_connections_of_one_process_are_one_principal(server: CertdServer) -> None:
    """Without tokens the principal is the user (or, by choice, the process) of the socket."""
    seen: list[str] = []
    code = (
        "import socket,sys; s=socket.create_connection(('127.0.0.1', int(sys.argv[1])));"
        "print(s.getsockname()[1], flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(server.port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        child_port = int(child.stdout.readline())
        mine = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
        for s in mine:
            seen.append(principal_of_peer(f"ipv4:127.0.0.1:{s.getsockname()[1]}", by="process"))
        seen.append(principal_of_peer(f"ipv4:127.0.0.1:{child_port}", by="process"))
        for port in [s.getsockname()[1] for s in mine] + [child_port]:
            seen.append(principal_of_peer(f"ipv4:127.0.0.1:{port}"))
        for s in mine:
            s.close()
    finally:
        child.kill()
        child.wait()
    assert seen[0] == seen[1] == f"process:{os.getpid()}"
    assert seen[2] == f"process:{child.pid}"
    assert seen[3] == seen[4] == seen[5] == f"uid:{os.getuid()}"  # the default: one user
    assert principal_of_peer("ipv4:10.1.2.3:5000") == "host:10.1.2.3"


def test_a_subordinate_uid_counts_as_its_owner(tmp_path: Path) -> None:
    """Rootless containers give a user /etc/subuid ranges: those uids are still that user."""
    subuid = tmp_path / "subuid"
    subuid.write_text("root:100000:65536\n1000:300000:65536\nbad line\n", encoding="utf-8")
    assert user_of(100000, str(subuid)) == 0
    assert user_of(165535, str(subuid)) == 0
    assert user_of(165536, str(subuid)) == 165536
    assert user_of(300001, str(subuid)) == 1000
    assert user_of(1000, str(subuid)) == 1000
    assert user_of(1000, str(tmp_path / "absent")) == 1000


def test_unary_calls_that_never_send_their_message_hold_no_thread(server: CertdServer) -> None:
    """Headers without a request message: the server waits for it in a serving thread."""
    address = f"127.0.0.1:{server.port}"
    stop = threading.Event()
    codes: list[str] = []
    with _channel(address) as hostile, _channel(address) as honest:
        # A unary method called as client-streaming: headers go out, the message never does.
        stalled = hostile.stream_unary("/certd.v1.Verifier/Verify")
        futures = [stalled.future(_silent(stop), timeout=60) for _ in range(40)]
        assert _settle(server.admission, HALF) == HALF
        assert _health(honest) == health_pb2.HealthCheckResponse.SERVING
        for f in futures:
            try:
                f.result()
                codes.append("OK")
            except grpc.RpcError as e:
                codes.append(e.code().name)
        stop.set()
        assert sorted(set(codes)) == ["DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"]
        assert codes.count("DEADLINE_EXCEEDED") == HALF  # reaped after first_message_timeout_s
        verifier = verifier_pb2_grpc.VerifierStub(honest)
        assert verifier.Verify(HONEST, timeout=10).verdict.status == tasks_pb2.CORRECT
    assert _settle(server.admission, 0) == 0


def test_a_stream_that_sends_then_stalls_is_ended_and_its_verdicts_kept(
    server: CertdServer,
) -> None:
    stop = threading.Event()

    def one_then_silence() -> Iterator[verifier_pb2.VerifyRequest]:
        yield HONEST
        stop.wait(60)

    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        call = verifier_pb2_grpc.VerifierStub(ch).VerifyStream(one_then_silence(), timeout=60)
        got = []
        with pytest.raises(grpc.RpcError) as ended:
            for reply in call:
                got.append(reply)
        stop.set()
    assert ended.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert "idle" in (ended.value.details() or "")
    assert got[0].verdict.status == tasks_pb2.CORRECT


def test_one_client_cannot_take_every_slot(tmp_path: Path) -> None:
    s = CertdServer(
        CertdConfig(
            data_dir=tmp_path / "d",
            listen="127.0.0.1:0",
            limits=_limits(max_rpcs_per_client=3),
            math=LAZY_MATH,
            countdown=NO_POOL,
        )
    )
    s.start()
    stop = threading.Event()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{s.port}") as ch:
            stub = verifier_pb2_grpc.VerifierStub(ch)
            calls = [stub.VerifyStream(_silent(stop), timeout=30) for _ in range(3)]
            assert _settle(s.admission, 3) == 3
            # Idle streams hold no verification slot: its 3 are free for a Verify.
            assert stub.Verify(HONEST, timeout=10).verdict.status == tasks_pb2.CORRECT
            calls += [stub.VerifyStream(_silent(stop), timeout=30) for _ in range(HALF - 3)]
            assert _settle(s.admission, HALF) == HALF
            with pytest.raises(grpc.RpcError) as refused:  # half the threads are its
                stub.Verify(HONEST, timeout=5)
            assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_health_in_flight" in (refused.value.details() or "")
            stop.set()
            for c in calls:
                list(c)
            assert stub.Verify(HONEST, timeout=10).verdict.status == tasks_pb2.CORRECT
    finally:
        s.stop(grace_s=0)


@pytest.fixture()
def tls_server(tmp_path: Path, pki: Path) -> Iterator[CertdServer]:  # noqa: F811 - the fixture
    s = _start(
        tmp_path,
        access=AccessConfig(
            tls_cert_file=pki / "server.crt",
            tls_key_file=pki / "server.key",
            tokens_file=pki / "tokens.json",
        ),
    )
    try:
        yield s
    finally:
        s.stop(grace_s=0)


def _tls(pki: Path, port: int) -> grpc.Channel:  # noqa: F811
    creds = grpc.ssl_channel_credentials((pki / "ca.crt").read_bytes())
    return grpc.secure_channel(f"127.0.0.1:{port}", creds)


def test_unauthenticated_watches_hold_nothing_on_a_tls_token_server(
    tls_server: CertdServer,
    pki: Path,  # noqa: F811
) -> None:
    token = (("authorization", "Bearer v-token"),)
    with _tls(pki, tls_server.port) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        anonymous = [health.Watch(health_pb2.HealthCheckRequest(), timeout=30) for _ in range(16)]
        refused = []
        for w in anonymous:
            with pytest.raises(grpc.RpcError) as denied:
                next(w)
            refused.append(denied.value.code())
        # Each is refused and holds nothing: UNAUTHENTICATED, or RESOURCE_EXHAUSTED when the
        # burst is past this client's share of health slots before authentication.
        assert set(refused) <= {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert grpc.StatusCode.UNAUTHENTICATED in refused
        assert tls_server.health.watches == 0
        reflect = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
        )
        with pytest.raises(grpc.RpcError) as denied:
            list(reflect)
        assert denied.value.code() is grpc.StatusCode.UNAUTHENTICATED
        # Authenticated watches hold no serving thread and are bounded.
        watches = []
        for _ in range(8):  # one at a time: each frees its health slot once it is open
            w = health.Watch(health_pb2.HealthCheckRequest(), metadata=token, timeout=30)
            assert next(w).status == health_pb2.HealthCheckResponse.SERVING
            watches.append(w)
        extra = health.Watch(health_pb2.HealthCheckRequest(), metadata=token, timeout=30)
        with pytest.raises(grpc.RpcError) as busy:
            next(extra)
        assert busy.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        # Anonymous calls that never send their message are refused before taking a thread.
        stop = threading.Event()
        stalled = ch.stream_unary("/certd.v1.Verifier/Verify")
        anonymous_calls = [stalled.future(_silent(stop), timeout=30) for _ in range(40)]
        for f in anonymous_calls:
            with pytest.raises(grpc.RpcError) as denied:
                f.result()
            assert denied.value.code() is grpc.StatusCode.UNAUTHENTICATED
        stop.set()
        assert tls_server.admission.in_flight == 0
        assert _health(ch) == health_pb2.HealthCheckResponse.SERVING
        reply = verifier_pb2_grpc.VerifierStub(ch).Verify(HONEST, metadata=token, timeout=10)
        assert reply.verdict.status == tasks_pb2.CORRECT
        for w in watches:
            w.cancel()
        deadline = time.monotonic() + 5
        while tls_server.health.watches and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tls_server.health.watches == 0


def test_one_token_principal_holds_at_most_half_the_slots(
    tls_server: CertdServer,
    pki: Path,  # noqa: F811
) -> None:
    """Two connections, one token: the token is the principal, held to half of the slots."""
    token = (("authorization", "Bearer v-token"),)
    stop = threading.Event()
    creds = grpc.ssl_channel_credentials((pki / "ca.crt").read_bytes())
    own = [("grpc.use_local_subchannel_pool", 1)]
    address = f"127.0.0.1:{tls_server.port}"
    with (
        grpc.secure_channel(address, creds, options=own) as a,
        grpc.secure_channel(address, creds, options=own) as b,
        grpc.secure_channel(address, creds, options=own) as other,
    ):
        calls = [
            verifier_pb2_grpc.VerifierStub(ch).VerifyStream(
                _silent(stop), metadata=token, timeout=30
            )
            for ch in (a, b)
            for _ in range(8)
        ]
        assert _settle(tls_server.admission, HALF) == HALF
        refused = 0
        for c in calls:
            try:
                list(c)  # type: ignore[call-overload]  # a response iterator
            except grpc.RpcError as e:
                refused += e.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            if refused == 16 - HALF:
                break
        assert refused == 16 - HALF
        # Another principal still finds the other half.
        reply = verifier_pb2_grpc.VerifierStub(other).Verify(
            HONEST, metadata=(("authorization", "Bearer c-token"),), timeout=10
        )
        assert reply.verdict.status == tasks_pb2.CORRECT
        stop.set()


def test_stalled_health_calls_cannot_take_the_threads_of_health(server: CertdServer) -> None:
    """Health requests that never arrive hold a health slot for at most health_idle_timeout_s."""
    address = f"127.0.0.1:{server.port}"
    stop = threading.Event()
    with _channel(address) as hostile:
        stalled = hostile.stream_unary("/grpc.health.v1.Health/Check")
        futures = [stalled.future(_silent(stop), timeout=60) for _ in range(40)]
        codes = []
        for f in futures:
            try:
                f.result()
                codes.append("OK")
            except grpc.RpcError as e:
                codes.append(e.code().name)
        stop.set()
    # Half the health slots per client; the rest refused at once; the stalled ones reaped.
    assert codes.count("DEADLINE_EXCEEDED") == 2
    assert codes.count("RESOURCE_EXHAUSTED") == 38
    with grpc.insecure_channel(address) as honest:
        assert _health(honest) == health_pb2.HealthCheckResponse.SERVING
        verifier = verifier_pb2_grpc.VerifierStub(honest)
        assert verifier.Verify(HONEST, timeout=10).verdict.status == tasks_pb2.CORRECT
