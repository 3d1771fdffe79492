"""One task object ``{"domain": …, "task": {…}}`` everywhere a task is accepted (issue 19).

The same Python object goes, unchanged, into ``forkgate verify-batch`` (JSONL), ``forkgate
certify --task``, the TRL reward column, verl's ``ground_truth``, certd's ``acceptance``
config and the Python API, against a real certd on 127.0.0.1. A task without a domain is a
one-line error everywhere; the older forms that name a domain still work, with a warning.
Per-item ``elapsed_ms`` of code checks is each item's own time (real sandbox).
"""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path

import pytest
from server_helpers import LAZY_MATH_SECTION, NO_POOL_SECTION

from certd.config import CertdConfig
from certd.errors import ConfigError
from certd.service.server import CertdServer
from certd.statements import task_digest
from forkgate import CertdClient, as_task, make_task
from forkgate.acceptance import begin_acceptance
from forkgate.cli import main as forkgate_main

SAME = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
MATH = {"domain": "math", "task": {"gold": "\\frac{1}{2}"}}
GOOD = "<answer>(25-5)*4+3</answer>"
DIGEST = task_digest(make_task("countdown", {"numbers": [25, 5, 4, 3], "target": 83}))


def test_python_api_reads_the_object_and_refuses_no_domain() -> None:
    assert task_digest(as_task(SAME)) == DIGEST
    assert as_task(MATH).math.gold == "\\frac{1}{2}"
    for bad in ({"numbers": [25, 5, 4, 3], "target": 83}, {"task": {"gold": "1"}}, {}):
        with pytest.raises(ValueError, match=r"^domain: required"):
            as_task(bad)
    with pytest.raises(ValueError, match="unexpected keys"):
        as_task({**SAME, "extra": 1})
    with pytest.raises(ValueError, match="domain: expected countdown, math or code"):
        as_task({"domain": "chess", "task": {}})
    # the older forms that name their domain: the same task, with a DeprecationWarning
    for old in ({"domain": "countdown", **SAME["task"]}, {"countdown": SAME["task"]}):  # type: ignore[dict-item]
        with pytest.warns(DeprecationWarning, match="deprecated"):
            assert task_digest(as_task(old)) == DIGEST


def test_verify_batch_and_certify_take_the_same_object(
    address: str, vkey: str, tmp_path: Path
) -> None:
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [{"id": 1, **SAME, "response": GOOD}, {"id": 2, **MATH, "response": "1/2"}]
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    argv = ["verify-batch", "--server", address, "--trust", vkey, "--in", str(src)]
    assert forkgate_main([*argv, "--out", str(dst)]) == 0
    out = [json.loads(x) for x in dst.read_text().splitlines()]
    assert [o["status"] for o in out] == ["CORRECT", "CORRECT"]
    assert [o["id"] for o in out] == [1, 2]

    cert = tmp_path / "cert.json"
    argv = ["certify", "--server", address, "--trust", vkey, "--task", json.dumps(SAME)]
    assert (
        forkgate_main([*argv, "--label", "25,-", "--witness", "(25-5)*4+3", "--out", str(cert)])
        == 0
    )
    check = ["check-cert", str(cert), "--trust", vkey, "--task", json.dumps(SAME)]
    assert forkgate_main(check) == 0


def test_certify_without_a_domain_is_one_line(
    address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["certify", "--server", address, "--task", json.dumps(SAME["task"])]
    assert forkgate_main([*argv, "--label", "25,-", "--witness", "(25-5)*4+3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("forkgate: error: --task: domain: required") and "\n" not in err


def test_trl_and_verl_columns_take_the_same_object(address: str, vkey: str) -> None:
    pytest.importorskip("trl", reason="the trl extra is installed by make (dev)")
    from forkgate.adapters.trl import CertdReward
    from forkgate.adapters.verl import compute_score

    reward = CertdReward(address, trusted_keys=[vkey])
    got = asyncio.run(
        reward(prompts=["p"] * 2, completions=[GOOD, GOOD], task=[SAME, json.dumps(SAME)])
    )
    assert got == [1.0, 1.0] and reward.last[0].question == DIGEST

    async def verl() -> dict[str, object]:
        return await compute_score(
            "countdown", GOOD, json.dumps(SAME), certd_address=address, trusted_keys=[vkey]
        )

    scored = asyncio.run(verl())
    assert scored["score"] == 1.0 and scored["forkgate_question"] == DIGEST
    with pytest.raises(ValueError, match="domain: required"):
        asyncio.run(reward(prompts=["p"], completions=[GOOD], task=[SAME["task"]]))


def _config(tmp_path: Path, tasks: list[object]) -> CertdConfig:
    return CertdConfig.model_validate(
        {
            "data_dir": tmp_path / "d",
            "listen": "127.0.0.1:0",
            "math": LAZY_MATH_SECTION,
            "countdown": NO_POOL_SECTION,
            "acceptance": {"task_sets": [{"name": "one", "tasks": tasks, "k": 2}]},
        }
    )


def test_acceptance_config_takes_the_same_object(tmp_path: Path) -> None:
    server = CertdServer(_config(tmp_path, [SAME]))
    server.start()
    try:
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            challenge = begin_acceptance(c, "r", "ck", "a" * 64, "one")
            prompts = [t for ep in challenge.sets for t in ep.prompts]
            assert [task_digest(t) for t in prompts] == [DIGEST]
    finally:
        server.stop(grace_s=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(
            ConfigError, match=r"acceptance.task_sets\[one\]: tasks\[0\]: domain: required"
        ):
            CertdServer(_config(tmp_path / "b", [SAME["task"]])).start()
