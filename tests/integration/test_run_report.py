"""`forkgate run` end to end at a tiny size, and its report rendered in headless Chromium.

The browser check copies the report, appends a script to a copy of ``index.html`` that
writes each image's ``naturalWidth`` into the DOM after ``load``, and reads the DOM Chromium
dumps: a plot that is missing or does not decode has ``naturalWidth`` 0.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from forkgate.jobs.report import plot_names, write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

_PROBE = """<script>
window.addEventListener("load", () => {
  for (const img of document.images) {
    img.setAttribute("data-natural-width", String(img.naturalWidth));
    img.setAttribute("data-complete", String(img.complete));
  }
  document.body.setAttribute("data-probed", "yes");
});
</script>"""


def rendered_images(report: Path, tmp: Path) -> tuple[str, list[tuple[str, int]]]:
    """Render a copy of the report in headless Chromium; (DOM, [(src, naturalWidth)])."""
    if CHROMIUM is None:
        pytest.fail("chromium is not installed (the Makefile's APT_PACKAGES installs it)")
    copy = tmp / "report-copy"
    shutil.copytree(report, copy)
    page = copy / "index.html"
    page.write_text(page.read_text().replace("</body>", _PROBE + "</body>"))
    run = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--allow-file-access-from-files",
            "--virtual-time-budget=10000",
            f"--user-data-dir={tmp / 'chromium-profile'}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    dom = run.stdout
    assert 'data-probed="yes"' in dom, f"the page did not finish loading: {run.stderr[-800:]}"
    images = []
    for tag in re.findall(r"<img [^>]*>", dom):
        src = re.search(r'src="([^"]+)"', tag)
        width = re.search(r'data-natural-width="([0-9]+)"', tag)
        assert src and width, tag
        images.append((src.group(1), int(width.group(1))))
    return dom, images


def _synthetic_data() -> dict[str, object]:
    tasks = []
    for i in range(6):
        tasks.append(
            {
                "task": {"numbers": [3, 4, 5 + i], "target": 12 + i},
                "feasible": 3,
                "certified": i % 4,
                "ec_at_k": (i % 4) / 3,
                "entry_counts": {"3,+": 5, "4,*": 3, "(none)": 1},
                "entry_entropy": 0.9,
                "family_completion": {"3,+": {"correct": 4, "total": 5}},
            }
        )
    return {
        "summary": {"tasks": 6, "EC@16": 0.5, "audit": {"grpc": "OK"}},
        "k": 16,
        "tasks": tasks,
        "pass_at_k": {"1": 0.3, "2": 0.45, "4": 0.6, "8": 0.7, "16": 0.75},
    }


def test_report_renders_every_plot_in_chromium(tmp_path: Path) -> None:
    data = _synthetic_data()
    index = write_report(tmp_path / "report", data)
    names = plot_names(data)
    assert len(names) == 7
    for name in names:
        assert (index.parent / f"{name}.png").stat().st_size > 1000
        json.loads((index.parent / f"{name}.json").read_text())
    _, images = rendered_images(index.parent, tmp_path)
    assert sorted(src for src, _ in images) == sorted(f"{n}.png" for n in names)
    assert all(width > 0 for _, width in images), images


def test_browser_check_sees_a_missing_plot(tmp_path: Path) -> None:
    index = write_report(tmp_path / "report", _synthetic_data())
    (index.parent / "pass_at_k.png").unlink()
    _, images = rendered_images(index.parent, tmp_path)
    assert dict(images)["pass_at_k.png"] == 0


@pytest.mark.slow
def test_forkgate_run_leaves_a_report_that_renders(tmp_path: Path) -> None:
    work = tmp_path / "run"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "forkgate.cli",
            "run",
            "--workdir",
            str(work),
            "--tasks",
            "4",
            "--k",
            "8",
            "--budget",
            "16",
            "--round-size",
            "8",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    # stderr is a pipe, not a terminal: each step's progress as plain lines (issue 19), no bar
    assert "evaluate: 1/4 tasks" in run.stderr and "ratchet: 1/4 records" in run.stderr
    assert "\r" not in run.stderr
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["tasks"] == 4
    assert summary["samples_evaluation"] == 32
    assert summary["audit"] == {"grpc": "OK", "files": "OK"}
    assert summary["records_refused"] == 0
    assert summary["families_certified"] >= 1, "the embedded policy certified nothing"
    assert summary["records_admitted"] >= 1
    records = [json.loads(x) for x in (work / "forktrees.jsonl").read_text().splitlines()]
    assert len(records) == 4
    # issue 16: the README's admit, offline (no --server), admits every record the run wrote
    admit = subprocess.run(
        [
            sys.executable, "-m", "forkgate.cli", "admit",
            "--trust", str(work / "certd-data" / "signing.pub"),
            "--in", str(work / "forktrees.jsonl"), "--out", str(tmp_path / "admitted.jsonl"),
            "--state", str(tmp_path / "ratchet.json"), "--json",
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert admit.returncode == 0, admit.stdout + admit.stderr
    assert json.loads(admit.stdout)["admitted"] == len(records)
    report = Path(summary["report"])
    assert report == work / "report" / "index.html"
    _, images = rendered_images(report.parent, tmp_path)
    assert len(images) == 7
    assert all(width > 0 for _, width in images), images
    data = json.loads((report.parent / "run.json").read_text())
    assert data["summary"]["families_certified"] == summary["families_certified"]


def test_run_with_vllm_needs_a_model_and_says_what_is_missing(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "forkgate.cli", "run", "--workdir", str(tmp_path / "w")]
    run = subprocess.run(
        [*base, "--sampler", "vllm"], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 2
    assert "--model is required with --sampler vllm" in run.stderr
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed here: the missing-vllm message cannot be observed")
    run = subprocess.run(
        [*base, "--sampler", "vllm", "--model", "some/model", "--tasks", "1", "--k", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 2
    assert "needs `pip install forkgate[vllm]` and a GPU" in run.stderr
