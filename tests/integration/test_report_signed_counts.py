"""The run report counts families from signed statements only (#31).

A real certd certifies fork trees of three Countdown tasks; the run's ratchet step
(``forkgate.jobs.run._admit``) admits them and the report's data (``report_data``) is built.
Raising or lowering a record's ``feasible``/``feasible_labels`` moves no figure of the
report; a record listing one family twice is refused (``DUPLICATE_FAMILY``) and counts
nothing.
"""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from forkgate import CertdClient
from forkgate.forktree import ForkTreeBuilder, countdown_prompt
from forkgate.jobs.run import _admit, _task_row
from forkgate.jobs.run_summary import Measured, report_data
from forkgate.samplers import Sample

TASKS = [
    {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": t}} for t in (83, 93, 85)
]


class _Witnesses:
    """A scripted policy answering each prompt with certd's own enumerated witnesses."""

    def __init__(self, client: CertdClient) -> None:
        self.answers: dict[str, list[str]] = {}
        for task in TASKS:
            fams = client.enumerate_families(task)
            self.answers[countdown_prompt(task)] = [
                f"<answer>{fams.labels[f.label_indexes[0]].witness}</answer>" for f in fams.families
            ]

    def sample(self, prompts: Any, n: int, max_tokens: int, **_: Any) -> list[list[Sample]]:
        seed = _.get("seed") or 0
        return [
            [Sample(self.answers[p][(i + seed) % len(self.answers[p])], []) for i in range(n)]
            for p in prompts
        ]


def _report(client: CertdClient, vkey: str, tmp: Path, records: list[dict[str, Any]]) -> Any:
    opts = SimpleNamespace(
        workdir=tmp, progress=False, k=4, m=3, budget=12, temperature=1.0, sampler_name="s",
        prefix_template="", ec_k=None,
    )  # fmt: skip
    sampler = _Witnesses(client)
    rows = [
        _task_row(client, t, sampler.sample([countdown_prompt(t)], n=4, max_tokens=1)[0], None)
        for t in TASKS
    ]
    admitted, refused, signed = _admit(opts, client, [vkey], records)  # type: ignore[arg-type]
    m = Measured(list(TASKS), rows, records, admitted, signed, {}, len(admitted), refused, 1, 0.0)
    data = report_data(opts, m, {})  # type: ignore[arg-type]
    return data["summary"], [(r["feasible"], r["certified"], r["ec_at_k"]) for r in data["tasks"]]


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if not k.startswith("records_")}


@pytest.fixture()
def records(address: str, tmp_path: Path) -> list[dict[str, Any]]:
    with CertdClient(address) as client:
        builder = ForkTreeBuilder(client, _Witnesses(client), m=3, budget=12, round_size=4)  # type: ignore[arg-type]
        return builder.run(TASKS, tmp_path / "forktrees.jsonl")


def test_edited_counts_in_the_run_files_move_no_report_figure(
    address: str, vkey: str, tmp_path: Path, records: list[dict[str, Any]]
) -> None:
    with CertdClient(address) as client:
        honest, rows = _report(client, vkey, tmp_path, copy.deepcopy(records))
        assert honest["records_admitted"] == 3 and honest["families_certified"] > 0, honest
        assert all(f >= c > 0 for f, c, _ in rows), rows
        # solution coverage (#33): the scripted policy cycles through one witness per family
        assert honest["solutions"] == honest["correct_evaluation"] > 0, honest
        assert 0 < honest["solution_coverage"] <= 1, honest
        for field, value in [("feasible_labels", 1), ("feasible_labels", 99), ("feasible", 99)]:
            edited = copy.deepcopy(records)
            for r in edited:
                r[field] = value
            summary, got = _report(client, vkey, tmp_path, edited)
            assert summary["families_feasible"] == honest["families_feasible"], (field, value)
            assert [f for f, _, _ in got] == [f for f, _, _ in rows], (field, value, got)
            if summary["records_refused"]:  # refused (TAMPERED_FEASIBLE): it counts nothing
                assert summary["records_refused"] == 3 and summary["families_certified"] == 0
            else:  # admitted: the edit moves no figure
                assert got == rows and _figures(summary) == _figures(honest), (field, value)
        tripled = copy.deepcopy(records)
        tripled[0]["families"] = [tripled[0]["families"][0]] * 3
        summary, got = _report(client, vkey, tmp_path, tripled)
        assert summary["records_refused"] == 1, summary
        assert summary["families_certified"] < honest["families_certified"], summary
        assert got[0][1] == 0 and got[1:] == rows[1:], got
