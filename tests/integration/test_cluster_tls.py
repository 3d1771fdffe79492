"""A 3-replica cluster over mutual TLS with bearer tokens, reached the way trainers reach it.

The replicas' certificate names a DNS SAN only (``certd.cluster.test``), no IP: a client that
balances over the replicas' IP addresses must name the SAN (``tls_server_name``). Checked:
``CertdClient`` over three addresses with TLS + client certificate + token fails over when a
replica dies; the TRL reward, verl's ``compute_score`` and the ``forkgate`` CLI take the same
settings (arguments, flags, or ``FORKGATE_*`` variables) and work against the cluster.

The tests share the module's one cluster (a replica a test killed is started again before the
next test) and certify puzzles no other test certifies.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import ROOT, Cluster, certify_items
from tls_helpers import Pki, make_pki

from forkgate import (
    CertdClient,
    CertdUnavailableError,
    CertificationRefusedError,
    ClientSettings,
    Connection,
)
from forkgate.adapters._scoring import Scorer
from forkgate.puzzles import countdown_puzzles

pytest.importorskip("redis")
pytestmark = pytest.mark.slow

TASK = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}
SETTINGS = ClientSettings(timeout_s=30, wait_for_ready=True, backoff_s=0.05)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Cluster]:
    access = {
        "tls_cert_file": str(pki.server_cert),
        "tls_key_file": str(pki.server_key),
        "client_ca_file": str(pki.ca),
        "client_roles": {"trainer": ["verify"]},  # the token adds certify
        "tokens_file": str(pki.tokens_file),
    }
    c = Cluster(tmp_path_factory.mktemp("cluster"), config={"access": access}).start()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture()
def cluster(shared_cluster: Cluster) -> Cluster:
    """The module's 3-replica TLS cluster, every replica serving."""
    return shared_cluster.revive()


def connection(c: Cluster, pki: Pki, **overrides: object) -> Connection:
    fields: dict[str, object] = {
        "addresses": tuple(c.addresses),
        "tls_ca": str(pki.ca),
        "tls_cert": str(pki.client_cert),
        "tls_key": str(pki.client_key),
        "token_file": str(pki.token_file("c-token")),
        "tls_server_name": pki.server_name,
    }
    fields.update(overrides)
    return Connection(**fields)  # type: ignore[arg-type]  # test helper: fields by name


def test_three_addresses_over_tls_fail_over_when_a_replica_dies(cluster: Cluster, pki: Pki) -> None:
    items = certify_items(countdown_puzzles(8, seed=131))
    conn = connection(cluster, pki)
    certs = []
    with conn.client(trusted_keys=[cluster.vkey], settings=SETTINGS) as client:
        for r in client.certify_batch(items[:4]):
            certs.append(r)
        cluster.replicas[0].kill()
        for _ in range(6):  # round robin would land on the dead one: each call still succeeds
            client.enumerate_families(TASK)
        for r in client.certify_batch(items[4:]):
            certs.append(r)
        ok = [c for c in certs if not isinstance(c, CertificationRefusedError)]
        for cert in ok:
            assert client.get_certificate(certificate_id=cert.certificate_id).envelope
    assert len(ok) >= 4
    assert cluster.audit().returncode == 0


def test_without_the_server_name_the_ip_addresses_do_not_verify(cluster: Cluster, pki: Pki) -> None:
    conn = connection(cluster, pki, tls_server_name=None)
    with (
        conn.client(settings=ClientSettings(timeout_s=10, max_retries=0)) as client,
        pytest.raises(CertdUnavailableError),
    ):
        client.enumerate_families(TASK)


def test_trl_and_verl_scorers_over_the_tls_cluster(
    cluster: Cluster, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connection(cluster, pki)
    scorer = Scorer(conn, trusted_keys=[cluster.vkey])

    async def score() -> list[object]:
        got = await scorer.score([TASK, TASK], ["(25-5)*4+3", "25+5+4+3"])
        await scorer.aclose()
        return [s.status for s in got]

    assert asyncio.run(score()) == ["CORRECT", "WRONG_ANSWER"]
    trl = pytest.importorskip("forkgate.adapters.trl", reason="the trl extra")
    reward = trl.CertdReward(conn, trusted_keys=[cluster.vkey])
    got = asyncio.run(reward(prompts=["p"], completions=["(25-5)*4+3"], task=[TASK]))
    assert got == [1.0]
    verl = pytest.importorskip("forkgate.adapters.verl", reason="the verl extra")
    # verl passes reward_kwargs; the TLS files come from the environment here.
    monkeypatch.setenv("FORKGATE_TLS_CA", str(pki.ca))
    monkeypatch.setenv("FORKGATE_TLS_CERT", str(pki.client_cert))
    monkeypatch.setenv("FORKGATE_TLS_KEY", str(pki.client_key))
    monkeypatch.setenv("FORKGATE_TOKEN", "c-token")
    out = asyncio.run(
        verl.compute_score(
            "countdown",
            "(25-5)*4+3",
            json.dumps(TASK),
            certd_address=",".join(cluster.addresses),
            certd_tls_server_name=pki.server_name,
            trusted_keys=[cluster.vkey],
        )
    )
    assert out["acc"] is True and out["score"] == 1.0


def test_cli_verbs_take_the_replicas_and_tls_settings(
    cluster: Cluster, pki: Pki, tmp_path: Path
) -> None:
    base = [sys.executable, "-m", "forkgate.cli"]
    flags = [
        "--server", ",".join(cluster.addresses), "--tls-ca", str(pki.ca),
        "--tls-cert", str(pki.client_cert), "--tls-key", str(pki.client_key),
        "--token-file", str(pki.token_file("c-token")),
        "--tls-server-name", pki.server_name,
    ]  # fmt: skip
    task = json.dumps({"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}})
    with CertdClient(
        cluster.addresses, tls_ca=pki.ca, tls_cert=pki.client_cert, tls_key=pki.client_key,
        token="a-token", tls_server_name=pki.server_name,
    ) as auditor:  # fmt: skip
        size = auditor.checkpoint().size  # what the module's earlier tests wrote
    certify = [*base, "certify", *flags, "--task", task, "--label", "25,-"]
    done = subprocess.run(
        [*certify, "--witness", "(25-5)*4+3", "--trust", cluster.vkey, "--json"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["certificateId"]
    # The same settings from the environment; no flag at all.
    env = {
        **os.environ,
        "FORKGATE_SERVER": ",".join(cluster.addresses),
        "FORKGATE_TLS_CA": str(pki.ca),
        "FORKGATE_TLS_CERT": str(pki.client_cert),
        "FORKGATE_TLS_KEY": str(pki.client_key),
        "FORKGATE_TOKEN_FILE": str(pki.token_file("c-token")),
        "FORKGATE_TLS_SERVER_NAME": pki.server_name,
    }
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps({"task": TASK, "response": "(25-5)*4+3"}) + "\n")
    done = subprocess.run(
        [*base, "verify-batch", "--in", str(rollouts), "--out", "-", "--json"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["status"] == "CORRECT"
    # A wrong token is refused with a clear message, not a traceback.
    bad = pki.token_file("not-a-token")
    done = subprocess.run(
        [*base, "verify-batch", "--in", str(rollouts), "--out", "-", "--token-file", str(bad)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    with CertdClient(
        cluster.addresses,
        tls_ca=pki.ca,
        tls_cert=pki.client_cert,
        tls_key=pki.client_key,
        token="a-token",
        tls_server_name=pki.server_name,
    ) as auditor:
        assert auditor.checkpoint().size == size + 2  # the certificate and the batch receipt
