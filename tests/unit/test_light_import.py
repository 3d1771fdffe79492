"""``import forkgate`` stays light, and the trainer adapters import no job (issue 20).

Each check imports in a fresh interpreter and reads ``sys.modules``: a trainer that imports
``forkgate`` for the reward gets neither torch nor a plotting stack nor ``forkgate.jobs``; one
that imports the TRL or verl adapter (which need torch anyway) still gets no job module.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "matplotlib", "numpy", "pandas", "transformers", "tqdm")


def _loaded(statement: str) -> list[str]:
    """The modules in ``sys.modules`` after running ``statement`` in a fresh interpreter."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))\n"
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    modules: list[str] = json.loads(run.stdout.strip().splitlines()[-1])
    return modules


def _jobs(modules: list[str]) -> list[str]:
    return [m for m in modules if m == "forkgate.jobs" or m.startswith("forkgate.jobs.")]


def test_import_forkgate_loads_no_heavy_library_and_no_job() -> None:
    modules = _loaded("import forkgate")
    heavy = [m for m in modules if m.split(".")[0] in HEAVY]
    assert heavy == [], f"import forkgate loaded {heavy}"
    assert _jobs(modules) == []


def test_the_library_modules_load_no_job() -> None:
    statement = (
        "import forkgate.client, forkgate.aio, forkgate.ratchet, forkgate.samplers, "
        "forkgate.metrics, forkgate.forktree, forkgate.acceptance, forkgate.guard, "
        "forkgate.support, forkgate.replay, forkgate.local, forkgate.puzzles"
    )
    modules = _loaded(statement)
    assert _jobs(modules) == []
    assert [m for m in modules if m.split(".")[0] in ("matplotlib", "torch")] == []


def _needs(*names: str) -> None:
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    if missing:
        pytest.skip(f"the adapter's optional dependencies are not installed: {missing}")


def test_the_trl_adapter_imports_no_job() -> None:
    _needs("torch", "trl")
    modules = _loaded("import forkgate.adapters.trl")
    assert "forkgate.adapters.trl" in modules
    assert _jobs(modules) == []
    assert [m for m in modules if m.split(".")[0] == "matplotlib"] == []


def test_the_verl_adapter_imports_no_job() -> None:
    _needs("torch", "verl", "numpy")
    modules = _loaded("import forkgate.adapters.verl")
    assert "forkgate.adapters.verl" in modules
    assert _jobs(modules) == []
