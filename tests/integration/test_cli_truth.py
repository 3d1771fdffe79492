"""The CLIs tell the truth (issue 19): every bad input is one line and a documented exit code.

Real certd on 127.0.0.1 (the ``address``/``vkey`` fixtures, or a ``certd serve`` process),
real files, real keys; the CLIs run through ``main()`` or as subprocesses where stdin,
``--version`` or a traceback-free stderr of the real process is the point.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from server_helpers import LAZY_MATH, NO_POOL

from certd.cli import main as certd_main
from certd.config import CertdConfig
from certd.service.server import CertdServer
from forkgate import CertdClient
from forkgate.cli import main as forkgate_main

# One server for the module (tests/conftest.py): the tests verify, or certify a family no
# other test's assertions depend on; the exceptions are marked fresh_certd.
pytestmark = pytest.mark.shared_certd

TASK = {"numbers": [25, 5, 4, 3], "target": 83}
GOOD = "<answer>(25-5)*4+3</answer>"


def _one_line_error(err: str) -> str:
    """The single error line of a failed command (and proof there is nothing else)."""
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "errors.pydantic.dev" not in err, err
    assert "Error(" not in err, err  # no Python repr such as KeyError('task')
    return lines[0]


def _run(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], input=stdin, capture_output=True, text=True, timeout=120
    )


def test_verify_batch_passes_fields_through_and_counts_real_lines(
    address: str, vkey: str, tmp_path: Path
) -> None:
    rows = [
        {"id": 7, "task_id": "t-1", "domain": "countdown", "task": TASK, "response": GOOD},
        {"task_id": "t-2", "task": TASK, "response": GOOD},  # no domain: an error, not Countdown
        {"id": "m", "domain": "math", "task": TASK, "response": "1"},  # wrong shape for math
        {"id": "f", "task": {"domain": "countdown", **TASK}, "response": "25+5+4+3"},  # flat alias
    ]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    # blank lines before and between: the error lines must name the file's own line numbers
    src.write_text("\n" + json.dumps(rows[0]) + "\n\n\n" + "\n".join(map(json.dumps, rows[1:])))
    argv = ["verify-batch", "--server", address, "--in", str(src), "--out", str(dst)]
    assert forkgate_main([*argv, "--trust", vkey, "--batch-size", "2"]) == 0
    out = [json.loads(x) for x in dst.read_text().splitlines()]
    assert [o["status"] for o in out] == ["CORRECT", "ERROR", "ERROR", "WRONG_ANSWER"]
    first = out[0]
    assert first["id"] == 7 and first["task_id"] == "t-1"  # unchanged, an integer stays one
    assert first["task"] == TASK and first["response"] == GOOD and first["domain"] == "countdown"
    assert first["family"] == "25,-" and first["kappa"] == "countdown.first-op.v1"
    assert "initiated" in first and isinstance(first["elapsed_ms"], float)
    assert out[1]["task_id"] == "t-2" and out[1]["line"] == 5
    assert out[1]["error"].startswith("domain: required")
    assert out[2]["line"] == 6 and "task.gold" in out[2]["error"]
    assert out[3]["id"] == "f"


def test_verify_batch_reads_stdin_and_writes_stdout(address: str) -> None:
    line = json.dumps({"id": 1, "domain": "countdown", "task": TASK, "response": GOOD})
    done = _run("forkgate.cli", "verify-batch", "--server", address, "--in", "-", "--out", "-",
                stdin=line + "\n")  # fmt: skip
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(x) for x in done.stdout.splitlines()]
    assert row["id"] == 1 and row["status"] == "CORRECT"


@pytest.mark.parametrize("size", ["0", "-1"])
def test_batch_size_below_one_is_usage(
    size: str, address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"domain": "countdown", "task": TASK, "response": GOOD}) + "\n")
    out = tmp_path / "out.jsonl"
    argv = ["verify-batch", "--server", address, "--in", str(src), "--out", str(out)]
    assert forkgate_main([*argv, "--batch-size", size]) == 2
    assert "--batch-size: expected >= 1" in _one_line_error(capsys.readouterr().err)


def test_missing_input_and_metrics_on_a_verdict_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "absent.jsonl")
    assert forkgate_main(["metrics", "--in", missing]) == 2
    assert "no such file" in _one_line_error(capsys.readouterr().err)
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text('\n{"id": "a", "status": "CORRECT", "reward": 1.0}\n')
    assert forkgate_main(["metrics", "--in", str(verdicts)]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert f"{verdicts}:2: not a fork-tree record" in line and "verify-batch" in line


@pytest.mark.fresh_certd  # reads the fixture server's own data dir
def test_trust_that_is_missing_or_private_is_usage(
    certd_server: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert = tmp_path / "cert.json"
    cert.write_text("{}")
    missing = str(tmp_path / "nope" / "signing.pub")
    assert forkgate_main(["check-cert", str(cert), "--trust", missing]) == 2
    assert f"{missing}: no such file" in _one_line_error(capsys.readouterr().err)
    private = str(tmp_path / "certd-data" / "signing.key")  # the fixture's server key
    assert forkgate_main(["check-cert", str(cert), "--trust", private]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "private signing key" in line and "signing.pub" in line
    assert certd_main(["audit", "--data-dir", str(tmp_path / "certd-data"),
                       "--trust", private, "--state", str(tmp_path / "s.json")]) == 2  # fmt: skip
    assert "private signing key" in capsys.readouterr().err  # certd errors: stderr


def test_certify_needs_a_domain(
    address: str, vkey: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["certify", "--server", address, "--label", "25,-", "--witness", "(25-5)*4+3"]
    assert forkgate_main([*base, "--task", json.dumps(TASK)]) == 2
    assert "domain: required" in _one_line_error(capsys.readouterr().err)
    for task in ({"domain": "countdown", "task": TASK}, {"domain": "countdown", **TASK}):
        assert forkgate_main([*base, "--task", json.dumps(task), "--trust", vkey]) == 0
    capsys.readouterr()
    assert forkgate_main([*base, "--task", json.dumps(TASK), "--domain", "math"]) == 2
    assert "task.gold" in _one_line_error(capsys.readouterr().err)


def test_admit_refusals_are_words_at_file_line_numbers(
    vkey: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "trees.jsonl"
    src.write_text('\n\n{"families": []}\n\n{"task": {"domain": "countdown", "numbers": 1}}\n')
    argv = ["admit", "--trust", vkey, "--in", str(src), "--out", str(tmp_path / "o.jsonl")]
    assert forkgate_main([*argv, "--no-state"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "admitted 0, refused 2"
    assert out[1] == "  line 3: MALFORMED (record: missing field 'task')"
    assert out[2].startswith("  line 5: MALFORMED (record: ") and "Error(" not in out[2]


def test_config_key_at_the_wrong_level(tmp_path: Path) -> None:
    cfg = tmp_path / "certd.json"
    cfg.write_text(json.dumps({"workers": 4, "math": {"max_workers": 2}}))
    done = _run("certd.cli", "serve", "--config", str(cfg), "--data-dir", str(tmp_path / "d"))
    assert done.returncode == 2
    line = _one_line_error(done.stderr + done.stdout)
    assert "unknown key 'workers' (did you mean 'math.workers'?)" in line
    assert "unknown key 'math.max_workers' (did you mean 'limits.max_workers'?)" in line


def _ledger_with(data: Path, verifies: int) -> None:
    server = CertdServer(
        CertdConfig(data_dir=data, listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL)
    )
    server.start()
    try:
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            for _ in range(verifies):
                c.verify({"domain": "countdown", **TASK}, GOOD)
    finally:
        server.stop(grace_s=1.0)


def test_audit_of_a_recreated_data_dir_says_how_to_reset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, state = tmp_path / "data", tmp_path / "auditor.json"
    _ledger_with(data, 3)
    assert certd_main(["audit", "--data-dir", str(data), "--state", str(state)]) == 0
    shutil.rmtree(data)
    _ledger_with(data, 1)  # a new log at the same place: smaller than the trusted checkpoint
    capsys.readouterr()
    audit = ["audit", "--data-dir", str(data), "--state", str(state)]
    assert certd_main([*audit, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert "rollback" in report["faults"][0]["message"]
    assert str(state) in report["hint"] and "--reset-state" in report["hint"]
    assert certd_main([*audit, "--reset-state"]) == 0


def test_version_and_defaults_in_help() -> None:
    for cli in ("forkgate.cli", "certd.cli"):
        done = _run(cli, "--version")
        assert done.returncode == 0 and done.stdout.split()[1][0].isdigit(), done
    helped = _run("forkgate.cli", "verify-batch", "--help").stdout
    assert "(default: 1000)" in helped and "'-' for stdin" in helped
    health = _run("certd.cli", "health", "--help").stdout
    assert "(default: 5.0)" in health
    top = _run("certd.cli", "--help").stdout
    assert "(exit 0)" not in top and "3 unreachable" in top


def test_the_python_api_has_no_default_domain(address: str) -> None:
    with CertdClient(address) as c:
        with pytest.raises(ValueError, match="domain: required"):
            c.verify({"gold": "1/2"}, "1/2")  # a math task without its domain
        assert c.verify({"domain": "math", "task": {"gold": "1/2"}}, "0.5").reward == 1.0
        with pytest.raises(ValueError, match="domain: required"):
            c.verify(TASK, GOOD)  # the old domain-less Countdown shape: no longer a default
        with pytest.warns(DeprecationWarning, match="deprecated"):
            assert c.verify({"domain": "countdown", **TASK}, GOOD).reward == 1.0  # flat alias


def test_a_bad_model_path_is_one_line(
    address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TASK) + "\n")
    argv = ["build-forktrees", "--server", address, "--tasks", str(tasks), "--out",
            str(tmp_path / "o.jsonl"), "--sampler", "transformers", "--model",
            str(tmp_path / "no-such-model")]  # fmt: skip
    assert forkgate_main(argv) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "not a model directory" in line and "huggingface.co" not in line


@pytest.mark.fresh_certd  # a first certify: 'certified', not an existing certificate
def test_certify_to_stdout_piped_into_check_cert(address: str, vkey: str) -> None:
    task = json.dumps({"domain": "countdown", "task": TASK})
    made = _run("forkgate.cli", "certify", "--server", address, "--task", task, "--label",
                "25,-", "--witness", "(25-5)*4+3", "--out", "-")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["certificateId"] and "certified" in made.stderr
    checked = _run("forkgate.cli", "check-cert", "-", "--trust", vkey, "--task", task,
                   stdin=made.stdout)  # fmt: skip
    assert checked.returncode == 0 and "certificate OK" in checked.stdout, checked.stderr
    missing = _run("forkgate.cli", "check-cert", "absent.json", "--trust", vkey)
    assert missing.returncode == 2
    assert _one_line_error(missing.stderr) == "forkgate: error: absent.json: no such file"


def test_kappa_report_reads_verify_batch_output(
    address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = {"numbers": [1, 2, 3], "target": 6}
    pairs = [
        ("a", TASK, GOOD),
        ("a", TASK, "<answer>4*(25-5)+3</answer>"),
        ("b", other, "<answer>1+2+3</answer>"),
        ("b", other, "<answer>1*2*4</answer>"),
    ]
    rows = [
        {"task_id": tid, "domain": "countdown", "task": task, "response": response}
        for tid, task, response in pairs
    ]
    src, dst = tmp_path / "in.jsonl", tmp_path / "verdicts.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["verify-batch", "--server", address, "--in", str(src), "--out", str(dst)]
    assert forkgate_main(argv) == 0
    capsys.readouterr()
    assert certd_main(["kappa-report", "--in", str(dst), "--json"]) == 0  # no join script
    report = json.loads(capsys.readouterr().out)["kappas"]["countdown.first-op.v1"]
    assert report["rollouts"] == 4 and report["tasks"] == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(dst.read_text() + '\n\n{"status": "CORRECT", "labels": {"k": "x"}}\n')
    assert certd_main(["kappa-report", "--in", str(bad)]) == 2
    assert f"{bad}: line 7: needs task" in capsys.readouterr().err  # certd errors: stderr
