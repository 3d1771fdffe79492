"""`forkgate build-forktrees`, `admit` and `metrics` end to end, against an OpenAI-style server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from http_helpers import JsonHandler, serve_http

from certd.signing.keys import SigningKey

ANSWERS = [
    "<answer>3+4*(25-5)</answer>",
    "<answer>(25-3)*4-5</answer>",
    "<answer>3-4*(5-25)</answer>",
    "<answer>25+5</answer>",
]


class _Policy(JsonHandler):
    def do_POST(self) -> None:
        body = self.body()
        n = body["n"]
        choices = [
            {
                "index": i,
                "text": ANSWERS[(i + body.get("seed", 0)) % len(ANSWERS)],
                "finish_reason": "stop",
            }
            for i in range(n * len(body["prompt"]))
        ]
        self.reply({"choices": choices})


@pytest.fixture()
def policy_url() -> Iterator[str]:
    with serve_http(_Policy) as url:
        yield url


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forkgate.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_build_admit_metrics(address: str, vkey: str, policy_url: str, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    task = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
    tasks.write_text(json.dumps(task) + "\n")
    out = tmp_path / "trees.jsonl"
    run = _cli(
        "build-forktrees",
        "--server",
        address,
        "--tasks",
        str(tasks),
        "--sampler",
        "openai",
        "--base-url",
        policy_url,
        "--model",
        "policy",
        "--m",
        "3",
        "--budget",
        "16",
        "--round-size",
        "4",
        "--out",
        str(out),
        "--json",
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"tasks": 1, "families": 3, "out": str(out)}
    again = _cli(
        "build-forktrees",
        "--server",
        address,
        "--tasks",
        str(tasks),
        "--sampler",
        "openai",
        "--base-url",
        policy_url,
        "--out",
        str(out),
        "--json",
    )
    assert json.loads(again.stdout)["tasks"] == 0  # resumed: nothing left to do

    admitted = tmp_path / "admitted.jsonl"
    adm = _cli(
        "admit",
        "--trust",
        vkey,
        "--server",
        address,
        "--in",
        str(out),
        "--out",
        str(admitted),
        "--state",
        str(tmp_path / "ratchet.json"),
        "--json",
    )
    assert adm.returncode == 0, adm.stderr
    assert json.loads(adm.stdout) == {
        "admitted": 1,
        "refused": [],
        "state": str(tmp_path / "ratchet.json"),
    }
    stranger = SigningKey.generate("stranger.example/log").verifier().to_vkey()
    alien = _cli(
        "admit",
        "--trust",
        stranger,
        "--in",
        str(out),
        "--out",
        str(tmp_path / "none.jsonl"),
        "--no-state",
        "--json",
    )
    assert alien.returncode == 1  # a refused record fails the command (strict by default)
    refused = json.loads(alien.stdout)
    assert refused["admitted"] == 0
    assert {r[0] for r in refused["refused"][0]["reasons"]} == {"UNKNOWN_KEY"}

    met = _cli("metrics", "--in", str(admitted), "--json")
    info = json.loads(met.stdout)
    assert (info["tasks"], info["families_certified"], info["feasible_labels"]) == (1, 3, 4)
    assert info["coverage"] == 0.75
