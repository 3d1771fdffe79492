"""Installs that fit the job: `make run` installs the run extra only (no verl, ray, TRL,
sentence-transformers or dev tools); `make test` installs the dev extra, which holds it."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"verl", "ray", "trl", "sentence-transformers", "mypy", "pytest", "reasoning-gym", "vllm"}


def _extras() -> dict[str, list[str]]:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras: dict[str, list[str]] = doc["project"]["optional-dependencies"]
    return extras


def _closure(name: str, extras: dict[str, list[str]]) -> set[str]:
    """The distribution names an extra installs, its forkgate[...] extras expanded."""
    out: set[str] = set()
    for req in extras[name]:
        inner = re.fullmatch(r"forkgate\[([\w,]+)\]", req)
        if inner:
            for sub in inner.group(1).split(","):
                out |= _closure(sub, extras)
        else:
            out.add(re.split(r"[<>=!\[ ;]", req, maxsplit=1)[0].lower())
    return out


def test_the_run_extra_holds_the_job_and_nothing_heavy() -> None:
    extras = _extras()
    run = _closure("run", extras)
    assert {"torch", "sympy", "pydantic", "matplotlib", "safetensors"} <= run
    assert not run & HEAVY, run & HEAVY
    assert _closure("run", extras) <= _closure("dev", extras)  # make test covers make run
    assert {"trl", "verl", "mypy", "pytest"} <= _closure("dev", extras)


def test_make_run_installs_the_run_extra_only() -> None:
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    run_target = re.search(r"^run: (.+)$", make, re.M)
    assert run_target and run_target.group(1).split() == ["setup-run"]
    stamp = make[make.index("$(RUN_STAMP): pyproject.toml") :].split("\n\n", 1)[0]
    assert "-e '.[run]'" in stamp and "verl" not in stamp and "dev" not in stamp


def test_the_suites_own_install_is_consistent() -> None:
    """`pip check` of the venv running this suite (the dev extra: TRL and verl together)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
