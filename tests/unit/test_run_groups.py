"""The main job's stratified-group figures against plain GRPO groups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forkgate.errors import InvalidRequestError
from forkgate.jobs.run import RunOptions, check_workdir, group_stats, run_main_job, staged_workdir


def test_a_flat_grpo_group_still_carries_a_stratified_signal() -> None:
    rows = [
        # Task 0: every rollout correct (plain GRPO: no signal); two families.
        {"rollouts": [["3,+", 1.0], ["3,+", 1.0], ["4,*", 1.0]]},
        # Task 1: mixed rewards in one family.
        {"rollouts": [["5,-", 1.0], ["5,-", 0.0]]},
    ]
    stats = group_stats(rows)
    assert stats["rollouts"] == 5
    assert stats["grpo_groups"] == 2
    assert stats["grpo_groups_without_signal"] == 1
    assert stats["stratified_groups"] == 3
    assert stats["stratified_singletons"] == 1
    # With the prior (1/2 for unseen families) the all-correct rollouts get positive advantage.
    assert stats["signal_in_flat_grpo_groups"] == 3


def test_no_rollouts() -> None:
    assert group_stats([]) == {"rollouts": 0}


def _earlier_run(path: Path) -> Path:
    (path / "certd-data").mkdir(parents=True)
    (path / "certd-data" / "signing.key").write_text("the key")
    (path / "summary.json").write_text("{}")
    return path


def test_an_earlier_run_is_replaced_only_with_force(tmp_path: Path) -> None:
    earlier = _earlier_run(tmp_path / "run")
    with pytest.raises(InvalidRequestError, match="pass --force"):
        check_workdir(earlier)
    check_workdir(earlier, force=True)  # allowed; nothing is deleted here
    assert (earlier / "certd-data" / "signing.key").read_text() == "the key"
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("...")
    with pytest.raises(InvalidRequestError, match="holds no earlier run"):
        check_workdir(precious, force=True)
    assert (precious / "thesis.tex").read_text() == "..."
    check_workdir(tmp_path / "new" / "dir")  # absent: fine, and not created
    assert not (tmp_path / "new").exists()


def test_a_failed_run_leaves_the_earlier_one_whole_and_no_partial_dir(tmp_path: Path) -> None:
    earlier = _earlier_run(tmp_path / "run")
    with pytest.raises(RuntimeError), staged_workdir(earlier) as staging:
        (staging / "summary.json").write_text('{"new": 1}')
        raise RuntimeError("the run failed half-way")
    assert (earlier / "certd-data" / "signing.key").read_text() == "the key"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    with staged_workdir(earlier) as staging:
        (staging / "summary.json").write_text('{"new": 1}')
    assert (earlier / "summary.json").read_text() == '{"new": 1}'
    assert not (earlier / "certd-data").exists()  # replaced whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def _no_sampler() -> Any:
    raise AssertionError("the sampler (a model load) comes after the inputs are checked")


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json\n", "not JSON"), ('{"numbers": [1, 2]}\n', "not a task"), ("\n", "no tasks")],
)
def test_bad_tasks_file_is_refused_before_the_workdir_is_touched(
    tmp_path: Path, content: str, message: str
) -> None:
    earlier = _earlier_run(tmp_path / "run")
    bad = tmp_path / "tasks.jsonl"
    bad.write_text(content)
    opts = RunOptions(workdir=earlier, force=True, tasks_file=str(bad))
    with pytest.raises(InvalidRequestError, match=message):
        run_main_job(opts, make_sampler=_no_sampler)
    assert (earlier / "certd-data" / "signing.key").read_text() == "the key"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "tasks.jsonl"]
    missing = RunOptions(workdir=earlier, force=True, tasks_file=str(tmp_path / "absent"))
    with pytest.raises(InvalidRequestError, match="tasks-file"):
        run_main_job(missing, make_sampler=_no_sampler)
