"""Packaging rules: stubs match the .proto, __all__ sorted, the client stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("certd", "sandboxes", "client")


def test_generated_stubs_match_the_proto() -> None:
    run = subprocess.run(
        [sys.executable, "scripts/gen_protos.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, f"stubs drifted; run `make protos`:\n{run.stderr}"


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "/v1/" not in str(p))


def _with_lazy_imports(body: list[ast.stmt], lazy: bool) -> list[ast.stmt]:
    """The module's statements; with a PEP 562 ``__getattr__``, also the imports under
    ``if TYPE_CHECKING:`` (the names it loads on first use, e.g. certd.domains.math)."""
    out = list(body)
    for node in body if lazy else []:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            out.extend(node.body)
    return out


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_all_is_sorted_and_names_exist(path: Path) -> None:
    tree = ast.parse(path.read_text())
    exported: list[str] | None = None
    defined: set[str] = set()
    lazy = any(  # a PEP 562 module: ``def __getattr__`` or ``__getattr__ = lazy_exports(…)``
        (isinstance(n, ast.FunctionDef) and n.name == "__getattr__")
        or (
            isinstance(n, ast.Assign)
            and any(getattr(t, "id", "") == "__getattr__" for t in n.targets)
        )
        for n in tree.body
    )
    for node in _with_lazy_imports(tree.body, lazy):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            exported = [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    if exported is None:
        public = [n for n in defined if not n.startswith("_")]
        has_code = any(isinstance(n, ast.FunctionDef | ast.ClassDef) for n in tree.body)
        assert not (has_code and public), f"{path.name} defines public names but has no __all__"
        return
    assert exported == sorted(exported), f"__all__ of {path.name} is not sorted"
    missing = [n for n in exported if n not in defined]
    assert not missing, f"__all__ of {path.name} names undefined {missing}"


def test_client_imports_nothing_from_the_server() -> None:
    code = (
        "import sys, forkgate, forkgate.cli\n"
        "bad = [m for m in sys.modules if m.startswith(('certd.service', 'certd.domains', "
        "'certd.authority', 'certd.ledger.store', 'certd.ledger.log', 'sandboxes', 'pydantic', "
        "'torch'))]\n"
        "print(','.join(bad))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "", f"forkgate pulled in server modules: {run.stdout}"


def test_sandboxes_is_importable() -> None:
    import sandboxes

    assert sandboxes.__doc__
