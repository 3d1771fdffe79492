"""The sync and async clients: mirrored results, riding out a restart, key checks.

Which calls are retried, and on what, is in ``test_client_retries.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from pathlib import Path

import pytest
from port_helpers import closed_port, reserved_port
from server_helpers import LAZY_MATH, NO_POOL

from certd.config import CertdConfig
from certd.service.server import CertdServer
from certd.signing.keys import SigningKey
from certd.v1 import tasks_pb2
from forkgate import (
    AsyncCertdClient,
    CertdClient,
    CertdUnavailableError,
    CertificationRefusedError,
    ClientSettings,
    InvalidRequestError,
    VerificationError,
)

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}

# One server for the module's fixture users (tests/conftest.py): they verify, or certify a
# family whose certificate no assertion counts; the exception is marked fresh_certd.
pytestmark = pytest.mark.shared_certd


@pytest.mark.fresh_certd  # counts the fork tree's certificates and the log's entries
def test_async_client_mirrors_sync(address: str, vkey: str) -> None:
    async def run() -> tuple[list[int], str, int, int]:
        async with AsyncCertdClient(address, trusted_keys=[vkey]) as c:
            verdicts = await c.verify_batch(
                [(TASK, "<answer>(25-5)*4+3</answer>", "a"), (TASK, "<answer>1+2</answer>", "b")]
            )
            cert = await c.certify(TASK, "25,-", "(25-5)*4+3")
            tree = await c.get_fork_tree(TASK)
            fams = await c.enumerate_families(TASK)
            with pytest.raises(CertificationRefusedError):
                await c.certify(TASK, "3,+", "3+4*(25-5)")
            with pytest.raises(InvalidRequestError):
                await c.verify(tasks_pb2.Task(), "1")
            cp = await c.checkpoint()
            entries = await c.entries(0, cp.size)
            assert len(entries) == cp.size
            await c.inclusion_proof(cert.ledger_index)
            return (
                [v.status for v in verdicts],
                cert.certificate_id,
                len(tree.certificates),
                len(fams.labels),
            )

    statuses, cert_id, tree_size, labels = asyncio.run(run())
    with CertdClient(address, trusted_keys=[vkey]) as c:
        assert cert_id == c.certify(TASK, "25,-", "(25-5)*4+3").certificate_id
        assert [
            v.status
            for v in c.verify_batch(
                [(TASK, "<answer>(25-5)*4+3</answer>", "a"), (TASK, "<answer>1+2</answer>", "b")]
            )
        ] == statuses
        assert len(c.get_fork_tree(TASK).certificates) == tree_size == 1
        assert len(c.enumerate_families(TASK).labels) == labels


def test_wrong_trusted_key_fails_verification(address: str) -> None:
    stranger = SigningKey.generate("stranger.example/log").verifier().to_vkey()
    with CertdClient(address, trusted_keys=[stranger]) as c:
        with pytest.raises(VerificationError):
            c.verify(TASK, "<answer>(25-5)*4+3</answer>")
        with pytest.raises(VerificationError):
            c.certify(TASK, "25,-", "(25-5)*4+3")


def test_retries_until_the_server_comes_up(tmp_path: Path) -> None:
    holder: list[CertdServer] = []

    with reserved_port() as port:  # refused until certd takes it; nobody else can

        def start_later() -> None:
            time.sleep(0.8)  # the thing tested: the client's calls find nothing listening
            server = CertdServer(
                CertdConfig(
                    data_dir=tmp_path / "d",
                    listen=f"127.0.0.1:{port}",
                    math=LAZY_MATH,
                    countdown=NO_POOL,
                )
            )
            port.release()
            server.start()
            holder.append(server)

        t = threading.Thread(target=start_later)
        t.start()
        try:
            settings = ClientSettings(
                wait_for_ready=True, backoff_s=0.1, backoff_max_s=0.3, timeout_s=60
            )
            with CertdClient(f"127.0.0.1:{port}", settings=settings) as c:
                assert c.verify(TASK, "<answer>(25-5)*4+3</answer>").status == tasks_pb2.CORRECT
        finally:
            t.join()
            for s in holder:
                s.stop(grace_s=1)


def test_rides_out_a_restart_of_certd(tmp_path: Path) -> None:
    first = CertdServer(
        CertdConfig(
            data_dir=tmp_path / "d", listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL
        )
    )
    port = first.start()  # the restart binds the port the first server was given
    cfg = CertdConfig(
        data_dir=tmp_path / "d", listen=f"127.0.0.1:{port}", math=LAZY_MATH, countdown=NO_POOL
    )
    holder = [first]

    def restart() -> None:
        first.stop(grace_s=1)
        time.sleep(0.8)  # the thing tested: certd is down for a while
        holder.append(CertdServer(cfg))
        holder[-1].start()

    settings = ClientSettings(wait_for_ready=True, backoff_s=0.1, backoff_max_s=0.3, timeout_s=60)
    try:
        with CertdClient(f"127.0.0.1:{port}", settings=settings) as c:
            assert c.checkpoint().size == 0
            t = threading.Thread(target=restart)
            t.start()
            time.sleep(0.3)  # certd is stopping or down: the call waits for it
            assert c.verify(TASK, "<answer>(25-5)*4+3</answer>").status == tasks_pb2.CORRECT
            t.join()
    finally:
        for s in holder:
            s.stop(grace_s=1)


def test_a_new_client_does_not_inherit_an_earlier_clients_refused_connection(
    tmp_path: Path,
) -> None:
    """gRPC shares a connection between channels with the same target and options, its
    backoff included. An earlier client of the process that found nothing listening made a
    client created after certd started fail at once with "Connection refused" (seen in CI:
    the async half of the stream test below, on a server that was serving). Each client owns
    its connections: with a 30 s reconnect backoff on the earlier client, the later one of
    the same settings connects at once, sync and async."""
    settings = ClientSettings(max_retries=0, backoff_s=30, backoff_max_s=30, timeout_s=10)
    answer = "<answer>(25-5)*4+3</answer>"

    refused, started = threading.Event(), threading.Event()

    async def refused_then_served(address: str) -> int:
        async with AsyncCertdClient(address, settings=settings) as early:
            with pytest.raises(CertdUnavailableError):
                await early.verify(TASK, answer)
            refused.set()
            started.wait()
            async with AsyncCertdClient(address, settings=settings) as late:
                return (await late.verify(TASK, answer)).status

    early: CertdClient | None = None
    server: CertdServer | None = None
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            with reserved_port() as port:
                address = f"127.0.0.1:{port}"
                early = CertdClient(address, settings=settings)
                with pytest.raises(CertdUnavailableError):
                    early.verify(TASK, answer)
                aio = pool.submit(asyncio.run, refused_then_served(address))
                assert refused.wait(60) or aio.result(timeout=0)  # the async one refused too
                cfg = CertdConfig(
                    data_dir=tmp_path / "d", listen=address, math=LAZY_MATH, countdown=NO_POOL
                )
                server = CertdServer(cfg)
                port.release()
                server.start()
            started.set()
            with CertdClient(address, settings=settings) as late:
                assert late.verify(TASK, answer).status == tasks_pb2.CORRECT
            assert aio.result(timeout=60) == tasks_pb2.CORRECT
        finally:
            started.set()  # the async half never waits past the test
            if early is not None:
                early.close()
            if server is not None:
                server.stop(grace_s=1)


def test_gives_up_with_a_typed_error_when_nothing_listens() -> None:
    settings = ClientSettings(max_retries=2, backoff_s=0.05, timeout_s=2)
    with closed_port() as port, CertdClient(f"127.0.0.1:{port}", settings=settings) as c:
        t0 = time.perf_counter()
        with pytest.raises(CertdUnavailableError):
            c.checkpoint()
    assert time.perf_counter() - t0 < 30


def test_verify_stream_sync_and_async_check_every_group(
    address: str, vkey: str, certd_server: object
) -> None:
    every = certd_server.cfg.limits.stream_receipt_every  # type: ignore[attr-defined]
    items = [(TASK, f"<answer>{i}+25-5*4</answer>", f"s{i}") for i in range(every + 10)]
    with CertdClient(address, trusted_keys=[vkey]) as c:
        verdicts = list(c.verify_stream(iter(items)))
        batch = c.verify_batch(items)
    assert [v.id for v in verdicts] == [i[2] for i in items]
    assert [v.status for v in verdicts] == [v.status for v in batch]

    async def run() -> list[str]:
        async with AsyncCertdClient(address, trusted_keys=[vkey]) as c:
            return [v.id async for v in c.verify_stream(items)]

    assert asyncio.run(run()) == [i[2] for i in items]


def test_verify_stream_refuses_a_receipt_signed_by_another_key(address: str) -> None:
    stranger = SigningKey.generate("stranger.example/log").verifier().to_vkey()
    with CertdClient(address, trusted_keys=[stranger]) as c, pytest.raises(VerificationError):
        list(c.verify_stream([(TASK, "<answer>(25-5)*4+3</answer>", "x")]))
