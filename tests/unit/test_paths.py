"""The certify path goes one way through its modules, in the order docs/architecture.md draws.

Read from the source (AST), not by importing: a module's imports are every ``import`` and
``from … import`` in it, also under ``TYPE_CHECKING`` (a typing-only import back up the path is
still a cycle a reader has to walk).
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CERTIFY_PATH = [
    "certd.service.authority",  # the servicer: messages in, messages out
    "certd.authority.feasibility",  # witness verdict, label, gate decision, signing
    "certd.ledger.certificates",  # the one ledger call: record (keys, uniqueness, races)
    "certd.ledger.log",  # the ledger's face
    "certd.ledger.groupcommit",  # the committer thread
    "certd.ledger.checkpointer",  # consistency checks and the checkpoint signature
    "certd.ledger.store",  # the store interface (SQLite, Redis behind it)
]


def _path_of(module: str) -> Path:
    parts = module.split(".")
    file = ROOT.joinpath(*parts).with_suffix(".py")
    return file if file.exists() else ROOT.joinpath(*parts, "__init__.py")


def _imports(module: str) -> set[str]:
    """The certd modules ``module`` imports (``from a import b`` counts a.b when it is one)."""
    tree = ast.parse(_path_of(module).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if _path_of(sub).exists():
                    found.add(sub)
    return {m for m in found if m.startswith("certd.")}


def _reach(module: str) -> set[str]:
    """Every certd module ``module`` imports, directly or not."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        m = todo.pop()
        for dep in _imports(m):
            if dep not in seen and _path_of(dep).exists():
                seen.add(dep)
                todo.append(dep)
    return seen


@pytest.mark.parametrize("position", range(len(CERTIFY_PATH)))
def test_no_module_imports_one_before_it_on_the_path(position: int) -> None:
    module = CERTIFY_PATH[position]
    earlier = set(CERTIFY_PATH[:position])
    back = sorted(_reach(module) & earlier)
    assert not back, f"{module} reaches back up the certify path to {back}"


def test_each_step_reaches_the_next() -> None:
    for here, there in itertools.pairwise(CERTIFY_PATH):
        assert there in _reach(here), f"{here} does not lead to {there}"


def test_the_ledger_key_is_the_ledgers_business() -> None:
    """Only the ledger builds ledger keys: the authority and the service never see them."""
    for module in ("certd.authority.feasibility", "certd.service.authority"):
        text = _path_of(module).read_text(encoding="utf-8")
        assert "KEY_SEPARATOR" not in text and "certd.ledger.store" not in _imports(module)
        assert "feasibility/" not in text and "canonical_key" not in text


def test_the_servicer_reads_through_the_authority() -> None:
    """GetCertificate and GetForkTree ask the authority, not its index or the ledger's."""
    text = _path_of("certd.service.authority").read_text(encoding="utf-8")
    for reach_in in (".index", "catch_up", "label_items", "index_of", "CertificateIndex"):
        assert reach_in not in text, reach_in
    assert "certd.authority.index" not in _imports("certd.service.authority")
