"""The experiment's protocol defaults, the legacy configuration key, the cov-arm sweeps and the
matched-entropy comparison (issue 18)."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from forkgate.jobs.experiment.arms import cov_knobs, parse_arm
from forkgate.jobs.experiment.matched import _knob, matched_comparison
from forkgate.jobs.experiment.options import ExperimentOptions
from forkgate.jobs.experiment.protocol import LEGACY, config_key, run_experiment


def _parsed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *flags: str) -> ExperimentOptions:
    import forkgate.jobs.experiment as experiment
    from forkgate.cli import main

    seen: list[ExperimentOptions] = []

    def record(opts: ExperimentOptions, *, as_json: bool = False) -> int:
        seen.append(opts)
        return 0

    monkeypatch.setattr(experiment, "run_experiment", record)
    assert main(["experiment", "countdown", "--workdir", str(tmp_path), *flags]) == 0
    [opts] = seen
    return opts


def test_no_size_flags_run_issue_18s_protocol(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    opts = _parsed(monkeypatch, tmp_path)
    assert (opts.steps, opts.eval_tasks, opts.eval_n, opts.free_n) == (200, 256, 32, 64)
    assert len(opts.seeds) >= 5
    assert config_key(opts) == config_key(ExperimentOptions())  # the CLI's and the API's agree


def test_legacy_fields_at_their_old_value_stay_out_of_the_key() -> None:
    """The key of the first runs is the hash of the fields they had: ``free_n`` is not one."""
    old = ExperimentOptions(free_n=LEGACY["free_n"], eval_n=16)  # the first runs drew 16
    fields = {k: v for k, v in asdict(old).items() if k not in LEGACY}
    fields = {k: v for k, v in fields.items() if k not in ("workdir", "arms", "seeds", "threads")}
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode())
    assert config_key(old) == digest.hexdigest()[:12]
    assert config_key(old) != config_key(ExperimentOptions(free_n=64))


def test_runs_drawing_more_than_k_samples_start_a_new_configuration() -> None:
    """EC@16 over 32 draws was the plug-in count; the unbiased one is a new configuration."""
    opts = ExperimentOptions(eval_n=32)
    fields = {k: v for k, v in asdict(opts).items() if k not in ("workdir", "arms", "seeds")}
    fields.pop("threads")
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode())
    assert config_key(opts) != digest.hexdigest()[:12]


def test_cov_arms_sweep_the_selected_share() -> None:
    assert parse_arm("kl-cov@0.05").cov_ratio == 0.05
    assert parse_arm("clip-cov@0.2").cov_ratio == 0.2
    assert parse_arm("kl-cov").cov_ratio is None  # the options' cov_ratio
    for bad in ("clip-cov@0", "kl-cov@2"):
        with pytest.raises(ValueError, match="share"):
            parse_arm(bad)


def test_cov_arms_take_a_second_knob_after_the_share() -> None:
    kl = parse_arm("kl-cov@1/10")
    assert (kl.cov_ratio, kl.kl_cov_coef, kl.clip_cov_lb) == (1.0, 10.0, None)
    assert cov_knobs(kl, ExperimentOptions()) == (1.0, 10.0, (1.0, 5.0))
    clip = parse_arm("clip-cov@1/0.25")
    assert cov_knobs(clip, ExperimentOptions()) == (1.0, 1.0, (0.25, 5.0))
    assert cov_knobs(parse_arm("kl-cov"), ExperimentOptions()) == (0.01, 1.0, (1.0, 5.0))
    for bad, msg in (
        ("grpo+kl@0.1/2", "second knob"),
        ("kl-cov@1/0", "coefficient"),
        ("kl-cov@1/x", "not a number"),
        ("clip-cov@2/0.5", "share"),
        ("grpo+kl@nan", "finite"),  # nan passes every comparison
        ("kl-cov@1/inf", "finite"),
        ("clip-cov@1/-inf", "finite"),
    ):
        with pytest.raises(ValueError, match=msg):
            parse_arm(bad)
    assert _knob("kl-cov@1/10") == 10.0 and _knob("clip-cov@1/0.25") == 0.25
    assert _knob("kl-cov@0.05") == 0.05 and _knob("grpo+kl@0.3") == 0.3


def test_a_clip_cov_window_that_is_empty_is_refused_before_anything_runs(tmp_path: Path) -> None:
    work = tmp_path / "never"
    opts = ExperimentOptions(workdir=work, arms=("grpo", "clip-cov@1/5"), seeds=(0,))
    with pytest.raises(ValueError, match=r"lower bound 5\.0 must be below 5\.0"):
        run_experiment(opts)
    assert not work.exists()  # no certd started, no results file


def _rec(h: float, p1: float, ec: float) -> dict[str, Any]:
    return {"end": {"feasible_entropy": h, "pass@1": p1, "EC@16": ec}}


def test_matched_comparison_interpolates_at_the_budget_and_never_extrapolates() -> None:
    runs = {
        "grpo-unscored": {0: _rec(0.4, 0.30, 0.50), 1: _rec(0.5, 0.32, 0.52)},
        # kl-cov: 0.01 (bare) and 0.1 bracket both seeds' budgets
        "kl-cov": {0: _rec(0.2, 0.40, 0.45), 1: _rec(0.3, 0.40, 0.46)},
        "kl-cov@0.1": {0: _rec(0.6, 0.30, 0.60), 1: _rec(0.7, 0.30, 0.62)},
        # clip-cov never reaches the budget: no matched value
        "clip-cov@0.05": {0: _rec(0.1, 0.4, 0.4), 1: _rec(0.1, 0.4, 0.4)},
    }
    doc = matched_comparison(runs)
    kl = doc["methods"]["kl-cov"]
    assert kl["arms"] == ["kl-cov", "kl-cov@0.1"] and kl["seeds_matched"] == [0, 1]
    assert kl["per_seed"][0] == {"pass@1": 0.35, "EC@16": 0.525, "knob": 0.055}
    assert kl["per_seed"][1] == {"pass@1": 0.35, "EC@16": 0.54, "knob": 0.055}
    assert kl["Δpass@1 vs grpo-unscored"]["diffs"] == [5.0, 3.0]
    assert kl["ΔEC@16 vs grpo-unscored"]["mean"] == pytest.approx(2.25)
    clip = doc["methods"]["clip-cov"]
    assert clip["seeds_matched"] == [] and "pass@1" not in clip
    fixed = matched_comparison(runs, budget=0.25)["methods"]["kl-cov"]
    assert fixed["seeds_matched"] == [0] and fixed["per_seed"][1] is None  # 0.25 < seed 1's 0.3
    assert fixed["per_seed"][0]["pass@1"] == pytest.approx(0.3875)


REPORT = Path(__file__).resolve().parents[2] / "docs" / "experiment-countdown.md"


def _report_commands() -> list[list[str]]:
    """Every ``forkgate experiment countdown`` command of the report's sh blocks, as argv."""
    blocks = re.findall(r"```sh\n(.*?)```", REPORT.read_text(encoding="utf-8"), re.S)
    text = "\n".join(blocks).replace("\\\n", " ")
    return [
        shlex.split(line, comments=True)[1:]
        for line in text.splitlines()
        if line.startswith(".venv/bin/forkgate experiment countdown")
    ]


def test_every_experiment_command_in_the_report_parses(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The report's commands are hours of training: here the real CLI parses each one and every
    arm it names (``run_experiment`` replaced); the pipeline test runs the arms at a tiny size."""
    commands = _report_commands()
    assert len(commands) >= 5
    for argv in commands:
        flags = argv[2:]
        if "--workdir" in argv:  # keep the report's workdir out of the repository
            i = argv.index("--workdir")
            flags = argv[2:i] + argv[i + 2 :]
        opts = _parsed(monkeypatch, tmp_path, *flags)
        for arm in opts.arms:
            parse_arm(arm)


def test_every_arm_of_the_committed_run_scripts_parses() -> None:
    scripts = sorted((REPORT.parent / "results" / "exp18").rglob("*.sh"))
    arms = {a for s in scripts for a in re.findall(r"--arm (\S+?)\"?(?=\s|$)", s.read_text())}
    assert {"kl-cov@1/10", "clip-cov@1/-1", "strat-v2+replay"} <= arms
    for arm in arms:
        parse_arm(arm)


def test_the_reports_full_protocol_tables_are_the_committed_records_analysis(
    tmp_path: Path,
) -> None:
    """The figures quoted come from the committed JSONL by the analysis command the report
    gives (its ``--pair`` list included)."""
    from forkgate.jobs.experiment.analysis import markdown, write_analysis

    full = REPORT.parent / "results" / "exp18" / "full"
    blocks = re.findall(r"```sh\n(.*?)```", REPORT.read_text(encoding="utf-8"), re.S)
    [command] = [
        shlex.split(b.replace("\\\n", " ")) for b in blocks if "--out docs/results/exp18/full" in b
    ]
    pairs = [(command[i + 1], command[i + 2]) for i, a in enumerate(command) if a == "--pair"]
    assert len(pairs) >= 5
    records = sorted(full.glob("seed*/results.jsonl")) + sorted(full.glob("x-seed*/results.jsonl"))
    md = markdown(write_analysis(records, tmp_path, plots=False, pairs=pairs))
    assert md == (full / "analysis.md").read_text(encoding="utf-8")
    report = REPORT.read_text(encoding="utf-8")
    per_seed = md[md.index("| Arm | policy |") :].split("\n\n")[0]  # left in analysis.md
    rows = [x for x in md.splitlines() if x.startswith(("| ", "Run time")) and x not in per_seed]
    assert len(rows) > 40
    assert [r for r in rows if r not in report] == []
