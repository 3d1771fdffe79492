"""κ math.route.v1 rules, first-step extraction and clustering, and the determinacy report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from certd.domains.kappa_report import Rollout, determinacy, rollouts_by_kappa
from certd.domains.math.first_step import (
    MOVES,
    first_step_text,
    kappa_first_step_name,
    moves_digest,
    nearest_move,
)
from certd.domains.math.route import kappa_route, route_of


@pytest.mark.parametrize(
    ("text", "route"),
    [
        (r"\boxed{42}", "direct"),
        ("The answer is 7.", "direct"),
        ("So the answer is $3$.", "direct"),
        ("42", "direct"),
        ("Let's think step by step. First, factor.", "step-by-step"),
        ("<think>\nWe need the roots of the quadratic.", "step-by-step"),
        ("x^2 - 1 = 0 gives x = 1 or x = -1, and " + "more words " * 20, "step-by-step"),
        ("I cannot help with that request.", "other"),
        ("", "other"),
        ("What a lovely question about triangles and circles!", "other"),
    ],
)
def test_route_rules(text: str, route: str) -> None:
    assert route_of(text) == route
    family = kappa_route(text)
    assert (family.kappa, family.label, family.fields) == ("math.route.v1", route, {"route": route})


@pytest.mark.parametrize(
    ("text", "step"),
    [
        (
            "Let's think step by step. We substitute u = x^2 into the equation.",
            "We substitute u = x^2 into the equation.",
        ),
        (
            "Okay, so I need to find x.\nFirst, factor: (x-2)(x-3) = 0.",
            "First, factor: (x-2)(x-3) = 0.",
        ),
        (
            "To solve this, we use the Pythagorean theorem.",
            "To solve this, we use the Pythagorean theorem.",
        ),
        (r"\boxed{4}", None),
        ("The answer is 12.", None),
        ("Hello there. Nice weather.", None),
    ],
)
def test_first_step_text(text: str, step: str | None) -> None:
    assert first_step_text(text) == step


def test_nearest_move_is_deterministic_and_breaks_ties_by_order() -> None:
    protos = [("a", [1.0, 0.0]), ("b", [1.0, 0.0]), ("c", [0.0, 1.0])]
    assert nearest_move([1.0, 0.1], protos) == "a"
    assert nearest_move([0.1, 1.0], protos) == "c"
    with pytest.raises(ValueError):
        nearest_move([1.0], [])


def test_kappa_name_carries_model_hash_and_moves_digest() -> None:
    name = kappa_first_step_name("ab" * 32)
    assert name == f"math.first-step.v1+minilm.{'ab' * 6}.{moves_digest()}"
    assert len({label for label, _ in MOVES}) == len(MOVES)


def _rows(pattern: list[tuple[str, int]]) -> list[Rollout]:
    return [Rollout("t", label, float(s)) for label, s in pattern]


def test_determinacy_verdicts() -> None:
    decisive = determinacy(_rows([("a", 1)] * 4 + [("b", 0)] * 4))
    assert decisive.verdict == "decisive" and decisive.within == 0.0 and decisive.ratio == 0.0
    coarse = determinacy(_rows([("a", 1), ("a", 0)] * 4))
    assert coarse.verdict == "too coarse" and coarse.ratio == float("inf")
    mixed = determinacy(_rows([("a", 1), ("a", 0), ("b", 1), ("b", 0)] * 3))
    assert mixed.verdict == "too coarse"
    fine = determinacy(_rows([(str(i), i % 2) for i in range(8)]))
    assert fine.verdict == "too fine" and fine.mean_family_size == 1.0
    flat = determinacy(_rows([("a", 1)] * 3 + [("b", 1)] * 3))
    assert flat.verdict == "undetermined"


def test_determinacy_pools_tasks_and_checks_input() -> None:
    rows = [Rollout("t1", "a", 1.0)] * 3 + [Rollout("t1", "b", 0.0)] * 3
    rows += [Rollout("t2", "a", 0.0)] * 3 + [Rollout("t2", "b", 1.0)] * 3
    r = determinacy(rows)
    assert (r.tasks, r.families, r.rollouts, r.verdict) == (2, 4, 12, "decisive")
    with pytest.raises(ValueError, match="no rollouts"):
        determinacy([])
    with pytest.raises(ValueError, match=r"0\.\.1"):
        determinacy([Rollout("t", "a", 2.0)])


def test_rows_from_verify_batch_output() -> None:
    rows = [
        {"task": "t", "status": "CORRECT", "kappa": "k1", "family": "x", "labels": {"k2": "r"}},
        {"task": "t", "status": "WRONG_ANSWER", "labels": {"k1": "y", "k2": "r"}},
        {"task": "t", "status": "INFRA_ERROR", "labels": {"k1": "y"}},
        {"task_id": "u", "success": 0.5, "kappa": "k1", "label": "z"},
    ]
    by = rollouts_by_kappa(rows)
    assert sorted(by) == ["k1", "k2"]
    assert [(r.task, r.label, r.success) for r in by["k1"]] == [
        ("t", "x", 1.0),
        ("t", "y", 0.0),
        ("u", "z", 0.5),
    ]
    with pytest.raises(ValueError, match="row 1: needs task"):
        rollouts_by_kappa([{"status": "CORRECT", "labels": {"k": "a"}}])
    with pytest.raises(ValueError, match="row 1: needs labels"):
        rollouts_by_kappa([{"task": "t", "status": "CORRECT"}])


def test_kappa_report_cli(tmp_path: Path) -> None:
    path = tmp_path / "rollouts.jsonl"
    rows = [{"task": "t", "labels": {"math.route.v1": "direct"}, "status": "CORRECT"}] * 4
    rows += [{"task": "t", "labels": {"math.route.v1": "other"}, "status": "WRONG_ANSWER"}] * 4
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    run = subprocess.run(
        [sys.executable, "-m", "certd.cli", "kappa-report", "--in", str(path), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)["kappas"]["math.route.v1"]
    assert report["verdict"] == "decisive" and report["families"] == 2
    run = subprocess.run(
        [sys.executable, "-m", "certd.cli", "kappa-report", "--in", str(path), "--kappa", "nope"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2 and "labels no row" in run.stderr  # errors go to stderr
