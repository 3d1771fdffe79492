"""`forkgate experiment countdown` end to end at a tiny size (every arm, the report)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from forkgate.experiment import _grpo_advantages


def test_standard_grpo_advantages_normalise_within_each_question() -> None:
    adv = _grpo_advantages([1.0, 0.0, 1.0, 0.0, 0.0, 0.0], ["a", "a", "b", "b", "c", "c"])
    assert [round(a, 3) for a in adv] == [1.0, -1.0, 1.0, -1.0, 0.0, 0.0]


@pytest.mark.slow
def test_experiment_runs_every_arm_and_writes_its_curves(tmp_path: Path) -> None:
    work = tmp_path / "exp"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "forkgate.cli",
            "experiment",
            "countdown",
            "--workdir",
            str(work),
            "--steps",
            "2",
            "--tasks",
            "4",
            "--prompts-per-step",
            "2",
            "--group-size",
            "4",
            "--eval-tasks",
            "3",
            "--eval-every",
            "1",
            "--eval-n",
            "4",
            "--sft-steps",
            "2",
            "--forktree-budget",
            "8",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    doc = json.loads((work / "experiment.json").read_text())
    assert set(doc["arms"]) == {"grpo", "stratified", "sft+stratified"}
    for arm in doc["arms"].values():
        assert [p["step"] for p in arm["curve"]] == [0, 1, 2]
        for point in arm["curve"]:
            for metric in ("pass@1", "pass@16", "EC@16", "entry_entropy", "first_token_entropy"):
                assert 0 <= point[metric] <= 10
            assert point["first_token_entropy"] > 0
        assert arm["intervention"]["forced_samples"] == 8 * arm["intervention"]["pairs"]
    sft = doc["arms"]["sft+stratified"]["sft"]
    assert sft["records"] == 4 and sft["admitted"] >= 1 and sft["families"] >= 1
    # Same seeds and weights: the two GRPO arms start from the same evaluation.
    assert len({json.dumps(doc["arms"][a]["curve"][0]) for a in ("grpo", "stratified")}) == 1
    report = work / "report"
    for name in ("experiment_pass@1", "experiment_EC@16", "experiment_intervention"):
        assert (report / f"{name}.png").stat().st_size > 1000
        assert json.loads((report / f"{name}.json").read_text())
    assert "experiment_first_token_entropy.png" in (report / "index.html").read_text()
