"""The single-node image (deploy/single/), run for real with the Docker engine.

The image (``make single-image``: the cluster image's debootstrap root plus this tree's wheel,
nothing pulled) is built here when missing. The container serves on a free port of the
host's loopback (host networking, as the documented run line), with its data dir bind-mounted:
a verdict comes back with a receipt that verifies against the key the container wrote, and
``certd info`` answers both from the host and from inside the container.

Without a Docker engine the test is skipped with the reason (``make docker-engine`` starts one).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from redis_helpers import free_port

from certd.cli import main as certd_main
from certd.v1 import tasks_pb2
from forkgate import CertdClient, Status

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("FORKGATE_SINGLE_IMAGE", "forkgate/certd-single:dev")
SERVE = ["serve", "--data-dir", "/data", "--config", "/etc/certd/certd.json"]
RUN_LINE = "docker run --rm --network host -v certd-data:/data forkgate/certd-single:dev"


def _docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def _image() -> None:
    if shutil.which("docker") is None or _docker("info", timeout=60).returncode:
        pytest.skip("no Docker engine here (make docker-engine starts one)")
    if _docker("image", "inspect", IMAGE).returncode:
        built = subprocess.run(
            ["make", "single-image", f"SINGLE_IMAGE={IMAGE}"],
            cwd=ROOT, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]


def test_the_run_line_is_documented_and_is_the_image_default() -> None:
    for doc in (ROOT / "README.md", ROOT / "docs" / "deploy-single.md"):
        assert RUN_LINE in doc.read_text(encoding="utf-8"), doc
    script = ROOT / "deploy" / "single" / "build-image.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    _image()
    config = json.loads(_docker("image", "inspect", IMAGE, "--format", "{{json .Config}}").stdout)
    assert config["Entrypoint"] == ["certd"] and config["User"] == "10001"
    assert config["Cmd"] == [*SERVE, "--listen", "127.0.0.1:50051"]


def test_single_image_serves_a_verdict_and_its_info(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _image()
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, 10001, 10001)  # the image's certd user
    port, name = free_port(), f"certd-single-{uuid.uuid4().hex[:8]}"
    address = f"127.0.0.1:{port}"
    run = _docker(
        "run", "-d", "--rm", "--name", name, "--network", "host", "-v", f"{data}:/data",
        IMAGE, *SERVE, "--listen", address,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    try:
        deadline = time.monotonic() + 120
        while certd_main(["health", "--server", address, "--timeout", "2"]) != 0:
            assert time.monotonic() < deadline, _docker("logs", name).stderr[-3000:]
            time.sleep(1)
        vkey = (data / "signing.pub").read_text().strip()  # written by the container
        task = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}
        with CertdClient(address, trusted_keys=[vkey]) as client:  # receipts checked offline
            verdict = client.verify(task, "<answer>(25-5)*4+3</answer>")
            # a batch with one math line: per-item verdicts, never INTERNAL for the batch
            half = {"domain": "math", "task": {"gold": "1/2"}}
            ok, math = client.verify_batch([(task, "<answer>(25-5)*4+3</answer>"), (half, "1/2")])
            info = client.server_info()
        assert ok.status is Status.CORRECT and ok.family == "25,-"
        assert math.status is Status.INFRA_ERROR and math.reward == 0.0
        assert math.detail.startswith("domain 'math' not served here (served: countdown"), math
        assert tasks_pb2.VerdictStatus.Name(verdict.status) == "CORRECT"
        assert verdict.reward == 1.0 and verdict.family == "25,-"
        assert info.log.vkey == vkey and info.log.size >= 1
        assert [d.name for d in info.domains] == ["countdown", "code"]  # no math extra inside
        capsys.readouterr()
        assert certd_main(["info", "--server", address, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["log"]["vkey"] == vkey
        inside = _docker("exec", name, "certd", "info", "--server", address)
        assert inside.returncode == 0, inside.stderr
        assert f"at {address} (plaintext, unauthenticated)" in inside.stdout
        assert vkey in inside.stdout
    finally:
        _docker("stop", "-t", "10", name)


def test_math_without_its_extra_is_one_line_not_a_traceback() -> None:
    """The image has no math extra: a config with math on refuses to start in one line."""
    _image()
    done = _docker(
        "run", "--rm", "--network", "none", IMAGE,
        "serve", "--data-dir", "/tmp/d", "--listen", "127.0.0.1:0",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "math.enabled: the math domain needs the forkgate[math] extra" in lines[0]
