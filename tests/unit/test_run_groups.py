"""The main job's stratified-group figures against plain GRPO groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from forkgate.errors import InvalidRequestError
from forkgate.jobs.run import fresh_workdir, group_stats


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


def test_fresh_workdir_empties_only_an_earlier_run(tmp_path: Path) -> None:
    earlier = tmp_path / "run"
    (earlier / "certd-data").mkdir(parents=True)
    (earlier / "summary.json").write_text("{}")
    fresh_workdir(earlier)
    assert earlier.is_dir() and not any(earlier.iterdir())
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("...")
    with pytest.raises(InvalidRequestError, match="holds no earlier run"):
        fresh_workdir(precious)
    assert (precious / "thesis.tex").read_text() == "..."
    fresh_workdir(tmp_path / "new" / "dir")
    assert (tmp_path / "new" / "dir").is_dir()
