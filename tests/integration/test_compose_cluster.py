"""The deploy/cluster compose file, run for real with Debian's ``docker-compose`` (1.29).

Six services (Redis with AOF ``always``, three certd replicas, the nginx gRPC balancer and a
witness) start from the image ``make cluster-image`` builds (debootstrap + ``docker import``,
nothing pulled; built here when missing). Every service uses host networking on loopback, so
the test runs a copy of the deploy files with each port moved to a free one (the files
themselves keep the documented ports). Certificates go through the balancer, the witness
cosigns, ``certd audit`` passes on the Redis ledger; after ``docker kill`` of one replica the
balancer keeps certifying and the audit still passes.

Without a Docker engine the test is skipped with the reason; without ``docker-compose`` it fails
with the command that installs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import ROOT, certify_items, run_certd
from redis_helpers import free_port

from certd.signing.keys import SigningKey, save_signing_key
from forkgate import CertdClient, CertificationRefusedError, ClientSettings
from forkgate.puzzles import countdown_puzzles

pytestmark = pytest.mark.slow

DEPLOY = ROOT / "deploy" / "cluster"
IMAGE = os.environ.get("FORKGATE_CERTD_IMAGE", "forkgate/certd:dev")
ORIGIN = "forkgate.local/certd"
PORTS = {"redis": 6390, "lb": 50051, "c1": 50061, "c2": 50062, "c3": 50063, "witness": 8480}


def docker_ready() -> None:
    if (
        shutil.which("docker") is None
        or subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode
    ):
        pytest.skip("no Docker engine here (make docker-engine starts one)")
    assert shutil.which("docker-compose"), "docker-compose is missing: make sysdeps installs it"
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode:
        built = subprocess.run(
            ["make", "cluster-image", f"CERTD_IMAGE={IMAGE}"],
            cwd=ROOT, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]


def deploy_copy(dest: Path, ports: dict[str, int]) -> None:
    """The deploy files with every port moved and the image named; keys in ``secrets``."""
    moves = {str(PORTS[k]): str(v) for k, v in ports.items()}
    pattern = re.compile(r"(?<!\d)(" + "|".join(moves) + r")(?!\d)")
    for name in ("compose.yaml", "nginx.conf", "config/certd.json"):
        text = (DEPLOY / name).read_text()
        text = pattern.sub(lambda m: moves[m.group(1)], text)
        text = text.replace("image: forkgate/certd:dev", f"image: {IMAGE}")
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text(text)
    secrets = dest / "secrets"
    secrets.mkdir()
    for name, key in (("signing", SigningKey.generate(ORIGIN)),
                      ("witness", SigningKey.generate("witness.local/w1"))):  # fmt: skip
        save_signing_key(secrets / f"{name}.key", key)
        (secrets / f"{name}.pub").write_text(key.verifier().to_vkey() + "\n")
    for path in secrets.iterdir():
        os.chown(path, 10001, 10001)  # the image's certd user
    for path in (dest / "compose.yaml", dest / "nginx.conf", dest / "config" / "certd.json"):
        path.chmod(0o644)


@pytest.fixture()
def compose(tmp_path: Path) -> Iterator[tuple[list[str], dict[str, int], Path]]:
    docker_ready()
    ports = {k: free_port() for k in PORTS}
    d = tmp_path / "cluster"
    d.mkdir()
    deploy_copy(d, ports)
    cmd = [
        "docker-compose",
        "-p",
        f"fgtest{os.getpid()}{ports['lb']}",
        "-f",
        str(d / "compose.yaml"),
    ]
    up = subprocess.run([*cmd, "up", "-d"], capture_output=True, text=True, timeout=600)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        yield cmd, ports, d
    finally:
        if up.returncode != 0 or os.environ.get("FORKGATE_KEEP_LOGS"):
            logs = subprocess.run([*cmd, "logs", "--tail", "50"], capture_output=True, text=True)
            print(logs.stdout[-6000:])
        subprocess.run([*cmd, "down", "-v", "--timeout", "5"], capture_output=True, timeout=300)


def wait_serving(address: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        done = run_certd("health", "--server", address)
        if done.returncode == 0 or time.monotonic() > deadline:
            assert done.returncode == 0, done.stdout + done.stderr
            return
        time.sleep(1)


def witnessed_size(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            return int(json.loads(r.read())["size"])
    except OSError:
        return -1


def certify(address: str, vkey: str, items: list[tuple[dict[str, object], str, str]]) -> int:
    settings = ClientSettings(timeout_s=60, wait_for_ready=True, backoff_s=0.2)
    with CertdClient(address, trusted_keys=[vkey], settings=settings) as c:
        results = c.certify_batch(items)
    return sum(1 for r in results if not isinstance(r, CertificationRefusedError))


def test_compose_cluster_certifies_through_the_balancer_and_audits(
    compose: tuple[list[str], dict[str, int], Path],
) -> None:
    cmd, ports, d = compose
    lb = f"127.0.0.1:{ports['lb']}"
    redis_url = f"redis://127.0.0.1:{ports['redis']}/0"
    vkey = (d / "secrets" / "signing.pub").read_text().strip()
    wait_serving(lb)
    items = certify_items(countdown_puzzles(16, seed=151))
    first = certify(lb, vkey, items[: len(items) // 2])
    assert first >= 4
    deadline = time.monotonic() + 120  # the witness polls every 2 s
    while witnessed_size(ports["witness"]) < first and time.monotonic() < deadline:
        time.sleep(1)
    assert witnessed_size(ports["witness"]) >= first
    state = d / "audit.json"
    audit = run_certd("audit", "--ledger", redis_url, "--trust", vkey, "--state", str(state),
                      "--json")  # fmt: skip
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert json.loads(audit.stdout)["ok"] is True
    killed = subprocess.run([*cmd, "kill", "-s", "SIGKILL", "certd-2"], capture_output=True)
    assert killed.returncode == 0, killed.stderr
    second = certify(lb, vkey, items[len(items) // 2 :])
    assert second >= 4
    audit = run_certd("audit", "--ledger", redis_url, "--trust", vkey, "--state", str(state),
                      "--json")  # fmt: skip
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert json.loads(audit.stdout)["size"] == first + second
