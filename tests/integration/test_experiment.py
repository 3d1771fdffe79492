"""`forkgate experiment countdown` end to end at a tiny size: every arm, resumable JSONL, analysis.

Real parts: the CLI in a subprocess, a certd it starts, the embedded policy, the ratchet.
The size only shows the pipeline works; it says nothing about the mechanism.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from forkgate.advantages import grpo_advantages
from forkgate.jobs.experiment import ARMS
from forkgate.jobs.experiment.analysis import write_analysis

TINY = [
    "--steps", "1", "--tasks", "4", "--prompts-per-step", "2", "--group-size", "6",
    "--eval-tasks", "2", "--eval-n", "4", "--forktree-tasks", "2", "--forktree-budget", "8",
    "--pool-n", "16", "--sft-steps", "1", "--forced-n", "2", "--free-n", "4", "--json",
]  # fmt: skip


def test_standard_grpo_advantages_normalise_within_each_question() -> None:
    adv = grpo_advantages([1.0, 0.0, 1.0, 0.0, 0.0, 0.0], ["a", "a", "b", "b", "c", "c"])
    assert [round(a, 3) for a in adv] == [1.0, -1.0, 1.0, -1.0, 0.0, 0.0]


def _run(
    work: Path, arms: list[str], seeds: list[str], extra: list[str] | None = None
) -> tuple[dict[str, object], str]:
    argv = [sys.executable, "-m", "forkgate.cli", "experiment", "countdown", "--workdir", str(work)]
    for a in arms:
        argv += ["--arm", a]
    for s in seeds:
        argv += ["--seed", s]
    argv += TINY + (extra or [])
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    out: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    return out, run.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~12 short runs and two certd starts; minutes on a loaded machine
def test_every_arm_runs_appends_one_line_and_a_rerun_skips_it(tmp_path: Path) -> None:
    work = tmp_path / "exp"
    arms = list(ARMS)
    first, log = _run(work, arms, ["0"])
    # stderr is a pipe, not a terminal: progress comes as plain lines (issue 19), no bar
    assert "grpo seed 0: 1/1 steps" in log and "\r" not in log, log[-2000:]
    assert first["ran"] == len(arms) + 1 and first["skipped"] == 0  # + the "start" record
    lines = [json.loads(x) for x in (work / "results.jsonl").read_text().splitlines()]
    assert {r["arm"] for r in lines} == {"start", *arms}
    for r in lines:
        for m in ("pass@1", "EC@16", "reach@16", "feasible_entropy", "feasible_mass"):
            assert 0 <= r["end"][m] <= 10
        iv = r["intervention"]
        assert iv["forced_samples"] == 2 * iv["pairs"] and iv["free_samples"] == 4 * iv["pairs"]
        if r["arm"] != "start":  # the same pairs under the starting policy
            assert r["intervention_start"]["pairs"] == iv["pairs"]
    # A rerun with one more seed runs only the new pairs, and finds the fork trees the first
    # run left in the workdir (strat-v2 refuses to run without them).
    # kl-cov@0.05, kl-cov@1/10: points of the KL-Cov sweeps the matched-entropy comparison
    # interpolates (the share; at full share, the coefficient).
    again, _ = _run(work, ["strat-v2", "kl-cov@0.05", "kl-cov@1/10"], ["0", "1"])
    assert again["skipped"] == 2 and again["ran"] == 6
    recs = [json.loads(x) for x in (work / "results.jsonl").read_text().splitlines()]
    knobs = {(r["cov_ratio"], r["kl_cov_coef"]) for r in recs if r["arm"] == "kl-cov@1/10"}
    assert knobs == {(1.0, 10.0)}
    doc = write_analysis(work / "results.jsonl", work / "analysis")
    assert doc["matched"]["methods"]["kl-cov"]["arms"] == ["kl-cov", "kl-cov@0.05", "kl-cov@1/10"]
    assert doc["verdicts"]["overall"] in {"insufficient data", "between", "Refuted", "Confirmed"}
    assert (work / "analysis" / "pareto.png").stat().st_size > 1000


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_frontier_machinery_runs_end_to_end(tmp_path: Path) -> None:
    """Issue 33 at a tiny size: multi-family evaluations, GRPO checkpoints and interpolations,
    the forced-entry-credit arm, and the frontier analysis over the records."""
    work = tmp_path / "frontier"
    # 6 held-out tasks: the first 2 have under two feasible families (identities merged, #30)
    extra = ["--frontier", "--eval-every", "1", "--interp-alpha", "0.5", "--eval-tasks", "6"]
    out, _ = _run(work, ["grpo", "grpo+fec"], ["0", "1"], extra=[*extra, "--steps", "2"])
    assert out["ran"] == 6
    recs = {(r["arm"], r["seed"]): r for r in map(json.loads, (work / "results.jsonl").open())}
    grpo = recs[("grpo", 0)]
    assert [c["step"] for c in grpo["curve"]] == [1]
    assert [(p["step"], p["alpha"]) for p in grpo["interp"]] == [(1, 0.5), (2, 0.5)]
    assert "EC@16 multi" in grpo["end"] and "pass@1 multi" in grpo["end"]
    assert len(grpo["end_tasks"]) == 6 and "family_correct" in grpo["end_tasks"][0]
    assert recs[("grpo+fec", 0)]["interp"] == []
    ckpts = sorted(p.name for p in (work / "checkpoints").glob("*.safetensors"))
    assert ckpts == [f"grpo-seed{s}-step{n}.safetensors" for s in (0, 1) for n in (1, 2)]
    doc = write_analysis(work / "results.jsonl", work / "analysis", plots=False)
    assert set(doc["frontier"]) == {"grpo+fec"}
    assert set(doc["frontier"]["grpo+fec"]) == {"60", "200"}
