"""The math domain served over real gRPC: Verify, VerifyBatch, Certify, forkgate verify-batch."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from certd.config import CertdConfig
from certd.service.server import CertdServer
from forkgate import CertdClient, CertificationRefusedError

FACTOR_STEP = "Let's factor the quadratic: x^2 - 5x + 6 = (x - 2)(x - 3) = 0, so \\boxed{2, 3}."
TASK = {"domain": "math", "gold": "x = 2, x = 3"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CertdServer]:
    data = tmp_path_factory.mktemp("math") / "certd-data"
    cfg = CertdConfig.model_validate(
        {"data_dir": data, "listen": "127.0.0.1:0", "math": {"deadline_s": 2.0}}
    )
    srv = CertdServer(cfg)
    srv.start()
    # the pool and the model warm up in the background (math.warm_start): wait for them
    assert srv.checkers.for_domain("math").ready.wait(600)  # type: ignore[attr-defined]
    try:
        yield srv
    finally:
        srv.stop(grace_s=1.0)


@pytest.fixture(scope="module")
def addr(server: CertdServer) -> str:
    return f"127.0.0.1:{server.port}"


@pytest.fixture(scope="module")
def key(server: CertdServer) -> str:
    return str(server.key.verifier().to_vkey())


def test_verify_labels_both_kappas(addr: str, key: str) -> None:
    with CertdClient(addr, trusted_keys=[key]) as c:
        v = c.verify(TASK, FACTOR_STEP)
    assert v.verifier == "math@2.0.0"
    assert v.status == 1  # CORRECT
    assert v.kappa is not None and v.kappa.startswith("math.first-step.v1+minilm.")
    assert v.family == "factor" and v.pb.family.fields["move"] == "factor"
    labels = [(label.kappa, label.value) for label in v.pb.labels]
    assert labels == [("math.route.v1", "step-by-step")]
    assert "gold" in v.detail and "pred" in v.detail


def test_batch_mixes_domains_in_order(addr: str, key: str) -> None:
    countdown = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}
    items = [
        (TASK, r"\boxed{3, 2}"),
        (countdown, "<answer>(25-5)*4+3</answer>"),
        ({"domain": "math", "gold": r"\frac{1}{2}"}, r"\boxed{0.4}"),
        ({"domain": "math", "gold": "3"}, r"\boxed{" + "\\frac{1}{" * 30 + "2" + "}" * 30 + "}"),
        ({"domain": "math", "gold": "3"}, r"\boxed{3"),
    ]
    with CertdClient(addr, trusted_keys=[key]) as c:
        got = [v.status for v in c.verify_batch(items)]
    # CORRECT, CORRECT, WRONG_ANSWER, TIME_LIMIT, UNPARSED
    assert got == [1, 1, 2, 5, 9]


def test_certify_under_each_kappa_and_the_gate(addr: str, key: str) -> None:
    task = {"domain": "math", "gold": "x = 2, x = 3", "question": "Solve x^2 - 5x + 6 = 0."}
    other = (
        "What a nice problem about factoring the quadratic expression into linear factors, "
        "done carefully with all the details written out in full right below, in order.\n"
        "Factor: (x-2)(x-3) = 0 so the roots are \\boxed{2, 3}."
    )
    with CertdClient(addr, trusted_keys=[key]) as c:
        a, b = c.verify(task, FACTOR_STEP), c.verify(task, other)
        assert a.family == b.family == "factor"  # one first-step cluster
        assert (a.pb.labels[0].value, b.pb.labels[0].value) == ("step-by-step", "other")
        kappa = a.kappa
        cert = c.certify(task, "factor", FACTOR_STEP, kappa=kappa)
        again = c.certify(task, "factor", other, kappa=kappa)
        assert again.certificate_id == cert.certificate_id
        c.certify(task, "step-by-step", FACTOR_STEP, kappa="math.route.v1")
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(task, "other", other, kappa="math.route.v1")  # same first step
        assert e.value.reason == "PSEUDO_FORK"
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(task, "factor", r"\boxed{4}", kappa=kappa)
        assert e.value.reason == "WITNESS_NOT_CORRECT"
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(task, "substitute", FACTOR_STEP, kappa=kappa)
        assert e.value.reason == "LABEL_MISMATCH"


def test_bad_math_task_names_its_field(addr: str) -> None:
    from forkgate import InvalidRequestError

    with CertdClient(addr) as c, pytest.raises(InvalidRequestError) as e:
        c.verify({"domain": "math", "gold": "x" * 5000}, "1")
    assert "gold" in e.value.field


def test_forkgate_verify_batch_cli(addr: str, key: str, tmp_path: Path) -> None:
    lines = [
        {"id": "a", "domain": "math", "task": {"gold": r"\frac{1}{2}"}, "response": r"\boxed{0.5}"},
        {
            "id": "b",
            "domain": "math",
            "task": {"gold": "7", "precision_digits": 3},
            "response": "8",
        },
        {"id": "c", "domain": "math", "task": {"gold": 7}, "response": "7"},
    ]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    cmd = [sys.executable, "-m", "forkgate.cli", "verify-batch", "--server", addr]
    cmd += ["--in", str(src), "--out", str(dst), "--trust", key]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    out = [json.loads(x) for x in dst.read_text().splitlines()]
    assert [o["status"] for o in out] == ["CORRECT", "WRONG_ANSWER", "ERROR"]
    assert out[0]["labels"] == {"math.route.v1": "direct"} and out[0]["family"] == "none"
    assert "task.gold" in out[2]["error"]
