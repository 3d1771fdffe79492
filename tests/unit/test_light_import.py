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

MARK = "sys.modules:"  # starts each snapshot's line (an import may print lines of its own)
HEAVY = ("torch", "matplotlib", "numpy", "pandas", "transformers", "tqdm")


def _loaded(statement: str) -> list[str]:
    """The modules in ``sys.modules`` after running ``statement`` in a fresh interpreter."""
    return _loaded_each([statement])[0]


def _loaded_each(statements: list[str]) -> list[list[str]]:
    """Run ``statements`` in order in one fresh interpreter: ``sys.modules`` after each."""
    code = "import json, sys\n" + "".join(
        f"{statement}\nprint({MARK!r}, json.dumps(sorted(sys.modules)))\n"
        for statement in statements
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = [line for line in run.stdout.splitlines() if line.startswith(MARK + " ")]
    assert len(lines) == len(statements), run.stdout[-2000:]
    return [json.loads(line.removeprefix(MARK + " ")) for line in lines]


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


ADAPTERS = {"trl": ("torch", "trl"), "verl": ("torch", "verl", "numpy")}


@pytest.fixture(scope="module")
def adapter_modules() -> dict[str, list[str]]:
    """``sys.modules`` after importing each installed adapter, the TRL one first, in one fresh
    interpreter (both import torch: about 25 s each on this machine, paid once).

    The verl snapshot is taken after the TRL import too; that import left no job module
    (its own test asserts so), so a job module in the verl snapshot is one verl's import
    loaded: the verl test's assertions say what they said with an interpreter of its own.
    """
    found = [
        name
        for name, deps in ADAPTERS.items()
        if all(importlib.util.find_spec(d) is not None for d in deps)
    ]
    statements = [f"import forkgate.adapters.{name}" for name in found]
    return dict(zip(found, _loaded_each(statements), strict=True))


def test_the_trl_adapter_imports_no_job(adapter_modules: dict[str, list[str]]) -> None:
    _needs(*ADAPTERS["trl"])
    modules = adapter_modules["trl"]
    assert "forkgate.adapters.trl" in modules
    assert _jobs(modules) == []
    assert [m for m in modules if m.split(".")[0] == "matplotlib"] == []


def test_the_verl_adapter_imports_no_job(adapter_modules: dict[str, list[str]]) -> None:
    _needs(*ADAPTERS["verl"])
    modules = adapter_modules["verl"]
    assert "forkgate.adapters.verl" in modules
    assert _jobs(modules) == []
