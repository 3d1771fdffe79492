"""``forkgate kappa-calibrate`` at a tiny size: the real policy, verifier and embedding model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from forkgate.cli import main


def test_calibration_runs_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "kappa"
    argv = ["kappa-calibrate", "--out", str(out), "--puzzles", "3", "--samples", "6"]
    argv += ["--math-problems", "1", "--math-solutions", "6"]
    assert main(argv) == 0
    report = json.loads((out / "calibration.json").read_text())
    assert (out / "kappa-calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (out / "kappa-calibration.md").read_text()
    assert "countdown.first-op.v1, initiated (gold)" in table and "proxy deviation" in table

    cd = report["countdown"]
    assert cd["questions"] == 3 and cd["rollouts"] == 18
    assert report["kappas"]["countdown"].endswith("upgma-cos0.2")
    assert report["kappas"]["math"].endswith("upgma-cos0.4")
    sweep = cd["sweep"]
    assert [r["threshold"] for r in sweep] == sorted(r["threshold"] for r in sweep)
    for r in sweep:
        a = r["agreement"]
        assert -1.0 <= a["ari_mean"] <= 1.0 and 0.0 < a["purity_mean"] <= 1.0
        assert len(a["ari_per_question"]) == 3
        assert set(r["deviation"]) == {"ratio", "ratio_over_baseline", "same_verdict"}
    # A larger threshold merges more: never more classes per question.
    classes = [r["agreement"]["classes_mean"] for r in sweep]
    assert classes == sorted(classes, reverse=True)

    math = report["math"]["kappas"]
    assert math["known route (gold)"]["agreement_with_route"]["ari_mean"] == 1.0
    assert {"math.route.v1", "math.first-step.v1"} <= set(math)
    assert any(name.endswith("(default)") for name in math)


def test_import_forkgate_stays_light() -> None:
    code = "import sys, forkgate.cli; print(sorted(m for m in ('torch', 'matplotlib', "
    code += "'sentence_transformers', 'certd.kappa') if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"
