"""Every ``certd`` verb tells the truth (issue 19): its defaults and exit codes in ``--help``,
its input formats named, ``-`` for stdin/stdout where it reads or writes a file, and every
usage error as one line on stderr with a documented exit code.

Real processes (``python -m certd.cli``) where stdin/stderr are the point, a real certd on
127.0.0.1 where a server is needed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from server_helpers import LAZY_MATH, NO_POOL

from certd.cli import build_parser
from certd.cli import main as certd_main
from certd.clihelp import _subparsers
from certd.config import CertdConfig
from certd.service.server import CertdServer
from certd.signing.keys import SigningKey, VerifierKey
from forkgate import CertdClient

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED = {0, 1, 2, 3}


def _run(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "certd.cli", *argv],
        input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "errors.pydantic.dev" not in err and "Error(" not in err
    return lines[0]


def _unwrapped(text: str) -> str:
    """Help text without argparse's line breaks (which also break after hyphens)."""
    return re.sub(r"-\s+", "-", " ".join(text.split()))


def _verbs() -> dict[str, argparse.ArgumentParser]:
    """Every leaf verb of ``certd`` by its prog ("certd serve", "certd families countdown")."""
    out: dict[str, argparse.ArgumentParser] = {}
    todo = _subparsers(build_parser())
    while todo:
        p = todo.pop()
        children = _subparsers(p)
        if children:
            todo += children
        else:
            out[p.prog] = p
    return out


def test_every_verb_shows_defaults_exit_codes_and_no_stray_exit_0() -> None:
    verbs = _verbs()
    assert {"certd serve", "certd info", "certd config", "certd health"} <= set(verbs)
    for prog, parser in verbs.items():
        text = _unwrapped(parser.format_help())
        assert "exit codes: 0 " in text and "(docs/exit-codes.md)" in text, prog
        assert "(exit 0)" not in text, prog
        assert parser.description, prog
        for action in parser._actions:
            default = action.default
            if (
                not action.option_strings
                or default in (None, False, "", [], argparse.SUPPRESS)
                or isinstance(default, bool)
            ):
                continue
            assert "default" in (action.help or "") or f"(default: {default})" in text, (
                prog,
                action.dest,
            )
    top = _unwrapped(build_parser().format_help())
    assert "(exit 0)" not in top and "docs/exit-codes.md" in top


def test_every_file_flag_names_its_format_or_stdin() -> None:
    named = ("JSON", "JSONL", "vkey", "'-'", "key", "CA", "cert", "file", "data dir")
    for prog, parser in _verbs().items():
        for action in parser._actions:
            if action.type is Path or action.dest in ("input", "trust", "log_key", "check"):
                assert any(w in (action.help or "") for w in named), (prog, action.dest)


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["info"], "certd info: error: the following arguments are required: --server"),
        (["audit"], "certd audit: error: one of the arguments --data-dir --server --ledger"),
        (["health", "--server", "x", "--timeout", "soon"], "certd health: error: argument "),
        (["nosuchverb"], "certd: error: argument command: invalid choice: 'nosuchverb'"),
        (["families", "countdown", "--numbers", "1,2"], "certd families countdown: error: "),
    ],
)
def test_usage_errors_are_one_line_exit_2(argv: list[str], wanted: str) -> None:
    done = _run(*argv)
    assert done.returncode == 2 and done.stdout == ""
    line = _one_line(done.stderr)
    assert line.startswith(wanted) and "--help" in line, line


def test_keygen_to_stdout_and_into_a_new_directory(tmp_path: Path) -> None:
    done = _run("keygen", "--name", "example.org/log", "--out", "-")
    assert done.returncode == 0, done.stderr
    key = SigningKey.from_private_string(done.stdout.strip())
    assert VerifierKey.from_vkey(done.stderr.strip()).key_id == key.key_id
    out = tmp_path / "new" / "dir" / "signing.key"
    assert certd_main(["keygen", "--out", str(out)]) == 0
    assert out.stat().st_mode & 0o777 == 0o600 and out.with_suffix(".pub").is_file()
    again = _run("keygen", "--out", str(out))
    assert again.returncode == 2
    assert _one_line(again.stderr) == f"certd: error: {out} exists; pass --force to overwrite"


def test_audit_trusts_a_vkey_from_stdin(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = CertdServer(
        CertdConfig(data_dir=data, listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL)
    )
    server.start()
    try:
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            c.verify({"domain": "countdown", "numbers": [1, 2], "target": 3}, "1+2")
    finally:
        server.stop(grace_s=1.0)
    base = ["audit", "--data-dir", str(data), "--state", str(tmp_path / "s.json"), "--trust", "-"]
    ok = _run(*base, stdin=(data / "signing.pub").read_text())
    assert ok.returncode == 0, ok.stdout + ok.stderr
    private = _run(*base, stdin=(data / "signing.key").read_text())
    assert private.returncode == 2
    assert "is a private signing key" in _one_line(private.stderr)
    empty = _run(*base, stdin="")
    assert empty.returncode == 2
    assert _one_line(empty.stderr) == "certd: error: -: expected a vkey on stdin, got nothing"


def test_serve_reads_its_config_from_stdin_and_errors_go_to_stderr(tmp_path: Path) -> None:
    bad = json.dumps({"ledger": {"workers": 2}})
    done = _run("serve", "--config", "-", "--data-dir", str(tmp_path / "d"), stdin=bad)
    assert done.returncode == 2 and done.stdout == ""
    line = _one_line(done.stderr)
    assert line.startswith("certd: error: config -: unknown key 'ledger.workers' (did you mean")
    assert "valid keys of ledger: group_commit_max_delay_ms" in line
    as_json = _run("serve", "--config", "-", "--json", stdin=bad)
    assert as_json.returncode == 2
    err = json.loads(as_json.stdout)  # --json: the error is one object on stdout
    assert err["error"] == "ConfigError" and "ledger.workers" in err["message"]


def test_missing_tls_files_are_usage_errors(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    for verb in (["health", "--server", "127.0.0.1:1"], ["info", "--server", "127.0.0.1:1"]):
        done = _run(*verb, "--tls-ca", str(ca))
        assert done.returncode == 2, done
        assert _one_line(done.stderr) == f"certd: error: --tls-ca: {ca}: no such file"


def test_exit_codes_of_the_help_are_the_documented_ones() -> None:
    page = (ROOT / "docs" / "exit-codes.md").read_text(encoding="utf-8")
    for prog, parser in _verbs().items():
        epilog = parser.epilog or ""
        codes = {int(w) for w in epilog.replace(",", " ").split() if w.isdigit()}
        assert codes and codes <= DOCUMENTED, (prog, epilog)
    assert "certd info" in page and "certd config" in page
