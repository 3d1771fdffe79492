"""Issue 29, item 4: one local user cannot lock out another; streamed items pay the rate.

Real certd on 127.0.0.1, real gRPC. A hostile client is an OS process, over one connection or
over eight: 16 ``VerifyStream`` calls that never send a message, reopened as soon as the server
ends them, and 16 busy ``VerifyBatch`` calls reissued as soon as they return. Without
authentication the principal on loopback is the user owning the client's socket
(``limits.local_principal: uid``, ``certd.service.peers``): four such processes of one uid
hold at most half the threads and half the verification slots together, so a single
``Verify`` from another uid (a client that drops to ``nobody`` before connecting) is answered
as on an idle server; with the principal the process, the four would hold every thread.
``local_principal: process`` keeps the per-process rule: one hostile process does not delay
another process of the same user. The 1 s bound is the issue's acceptance figure (a Verify on
an idle server takes a few ms here), not a benchmark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from server_helpers import LAZY_MATH, NO_POOL

from certd.config import CertdConfig, ServiceLimits
from certd.service.admission import per_principal
from certd.service.server import CertdServer
from certd.v1 import tasks_pb2, verifier_pb2, verifier_pb2_grpc

TASK = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83))
HONEST = verifier_pb2.VerifyRequest(id="honest", task=TASK, response="(25-5)*4+3")

ATTACKER = """
import sys, threading, time
import grpc
from certd.v1 import tasks_pb2, verifier_pb2, verifier_pb2_grpc

task = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83))
item = verifier_pb2.VerifyRequest(id="x", task=task, response="(25-5)*4+3")
batch = verifier_pb2.VerifyBatchRequest(items=[item] * 400)
own = [("grpc.use_local_subchannel_pool", 1)]  # a connection per channel
stubs = [
    verifier_pb2_grpc.VerifierStub(grpc.insecure_channel(sys.argv[1], options=own))
    for _ in range(int(sys.argv[2]))
]

def silent():
    time.sleep(3600)
    yield item

def idle(stub):
    while True:
        try:
            list(stub.VerifyStream(silent(), timeout=3600))
        except grpc.RpcError:
            time.sleep(0.01)

def busy(stub):
    while True:
        try:
            stub.VerifyBatch(batch, timeout=3600)
        except grpc.RpcError:
            time.sleep(0.01)

for i, target in enumerate([idle] * 16 + [busy] * 16):
    threading.Thread(target=target, args=(stubs[i % len(stubs)],), daemon=True).start()
print("ready", flush=True)
time.sleep(3600)
"""


NOBODY = """
import json, os, sys, time
import grpc
from certd.v1 import tasks_pb2, verifier_pb2, verifier_pb2_grpc

# Every module a call needs is imported before the drop: after it, nobody may not read the
# venv (a fresh clone under a private temp dir). A call to a closed loopback port loads them.
with grpc.insecure_channel("127.0.0.1:1") as warm:
    try:
        verifier_pb2_grpc.VerifierStub(warm).Verify(verifier_pb2.VerifyRequest(), timeout=0.5)
    except grpc.RpcError:
        pass
os.setgroups([])
os.setgid(65534)
os.setuid(65534)  # another user: its socket is nobody's
task = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83))
honest = verifier_pb2.VerifyRequest(id="honest", task=task, response="(25-5)*4+3")
waits = []
with grpc.insecure_channel(sys.argv[1]) as ch:
    stub = verifier_pb2_grpc.VerifierStub(ch)
    for _ in range(5):
        start = time.monotonic()
        try:
            ok = stub.Verify(honest, timeout=30).verdict.status == tasks_pb2.CORRECT
        except grpc.RpcError as e:
            ok = str(e.code())
        waits.append((time.monotonic() - start, ok))
print(json.dumps(waits))
"""


def _server(tmp_path: Path, local_principal: str) -> Iterator[CertdServer]:
    limits = ServiceLimits.model_validate({"local_principal": local_principal})
    s = CertdServer(
        CertdConfig(
            data_dir=tmp_path / "d",
            listen="127.0.0.1:0",
            math=LAZY_MATH,
            countdown=NO_POOL,
            limits=limits,
        )
    )
    s.start()
    try:
        yield s
    finally:
        s.stop(grace_s=0)


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[CertdServer]:
    yield from _server(tmp_path, "process")


@pytest.fixture(params=["uid", "process"])
def uid_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[CertdServer]:
    yield from _server(tmp_path, request.param)


def _attackers(address: str, processes: int, connections: int) -> list[subprocess.Popen[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ATTACKER, address, str(connections)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return procs


def _wait_in_flight(server: CertdServer, want: int) -> None:
    deadline = time.monotonic() + 30
    while server.admission.in_flight < want and time.monotonic() < deadline:
        time.sleep(0.05)


def _timed_verify(stub: verifier_pb2_grpc.VerifierStub) -> float:
    start = time.monotonic()
    reply = stub.Verify(HONEST, timeout=30)
    assert reply.verdict.status == tasks_pb2.CORRECT
    return time.monotonic() - start


@pytest.mark.parametrize("connections", [1, 8])
def test_idle_and_busy_calls_of_one_process_do_not_delay_another(
    server: CertdServer, connections: int
) -> None:
    """``local_principal: process``: the honest client is this process, the same uid."""
    address = f"127.0.0.1:{server.port}"
    lim = server.cfg.limits
    [attacker] = _attackers(address, 1, connections)
    try:
        half = (lim.max_workers - lim.max_health_in_flight) // 2  # of the RPC threads
        _wait_in_flight(server, half)
        assert server.admission.in_flight == half  # the attacker holds its half, no more
        with grpc.insecure_channel(address) as ch:
            stub = verifier_pb2_grpc.VerifierStub(ch)
            waits = [_timed_verify(stub) for _ in range(5)]
        assert max(waits) < 1.0, waits
        assert server.admission.in_flight <= half + 1
        assert server.admission.verifying <= per_principal(lim) + 1  # + the honest call
    finally:
        attacker.kill()
        attacker.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="the second user's client drops from root")
def test_forked_processes_of_one_user_do_not_delay_another_user(uid_server: CertdServer) -> None:
    """Four processes of one uid, 16 idle + 16 busy calls each, against nobody's Verify."""
    server = uid_server
    address = f"127.0.0.1:{server.port}"
    lim = server.cfg.limits
    total = lim.max_workers - lim.max_health_in_flight  # the RPC threads
    attackers = _attackers(address, 4, 2)
    try:
        by_uid = server.cfg.limits.local_principal == "uid"
        _wait_in_flight(server, total // 2 if by_uid else total)
        honest = subprocess.run(
            [sys.executable, "-c", NOBODY, address],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert honest.returncode == 0, honest.stderr
        waits = json.loads(honest.stdout)
        if by_uid:  # the four hold one half together; nobody is answered at once
            assert all(ok is True for _, ok in waits), waits
            assert max(w for w, _ in waits) < 1.0, waits
            assert server.admission.verifying <= per_principal(lim) + 1
        else:  # four principals: every thread taken, nobody refused (the rule uid closes)
            assert any(ok == "StatusCode.RESOURCE_EXHAUSTED" for _, ok in waits), waits
    finally:
        for p in attackers:
            p.kill()
            p.wait()


def test_a_streams_items_drain_the_rate_bucket(
    tmp_path: Path, redis_server: object, redis_prefix: str
) -> None:
    """One token per streamed item, as per unary call: 5 verdicts of a burst of 5, no more."""
    cfg = CertdConfig.model_validate(
        {
            "data_dir": tmp_path / "d",
            "listen": "127.0.0.1:0",
            "math": {"enabled": False},
            "cluster": {
                "ledger_url": redis_server.url,  # type: ignore[attr-defined]
                "redis_prefix": redis_prefix,
                "rate_limit_per_s": 0.01,
                "rate_limit_burst": 5,
            },
        }
    )
    server = CertdServer(cfg)
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
            stub = verifier_pb2_grpc.VerifierStub(ch)
            got = []
            with pytest.raises(grpc.RpcError) as limited:
                for reply in stub.VerifyStream(iter([HONEST] * 20), timeout=30):
                    got.append(reply)
            assert limited.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "rate limit" in (limited.value.details() or "")
            assert sum(r.HasField("verdict") for r in got) == 5
            with pytest.raises(grpc.RpcError) as empty:  # the bucket the stream drained
                stub.Verify(HONEST, timeout=10)
            assert empty.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        server.stop(grace_s=1.0)
