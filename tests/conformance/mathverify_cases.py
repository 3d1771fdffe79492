"""Math-Verify 0.9.0's public test cases, read from its sdist at test time (never copied here).

Example::

    cases = load_cases()          # downloads the sdist once into .cache/math-verify/
    cases[0].gold, cases[0].pred, cases[0].expected

The sdist is fetched with ``pip download --no-deps --no-binary :all: math-verify==0.9.0``
into ``.cache/math-verify/`` (``make math-verify-cases`` does the same), idempotently. The
test modules are read with ``ast``: every ``@pytest.mark.parametrize`` whose names include
``gold``, ``pred`` and ``expected`` (or ``result``) and whose values are literals gives cases;
the precision a test passes to ``compare_strings`` (``precision=5``, or a ``precision``
parameter) is kept; nothing from the sdist is executed.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CACHE_DIR", "SDIST", "Case", "ensure_sdist", "load_cases"]

ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = ROOT / ".cache" / "math-verify"
SDIST = "math_verify-0.9.0.tar.gz"


@dataclass(frozen=True)
class Case:
    """One public case: ``expected`` is True when Math-Verify must judge them equal."""

    source: str
    gold: str
    pred: str
    expected: bool
    precision: int = 6
    strict: bool = True
    latex_only: bool = False


def ensure_sdist(cache_dir: Path = CACHE_DIR) -> Path:
    """Download the sdist into ``cache_dir`` unless it is already there.

    Raises:
        RuntimeError: pip could not download it.

    Returns:
        The sdist's path.
    """
    path = cache_dir / SDIST
    if path.is_file():
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
    cmd += ["math-verify==0.9.0", "-d", str(cache_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not path.is_file():
        raise RuntimeError(f"cannot download math-verify==0.9.0: {done.stderr[-500:]}")
    return path


def _call_kwargs(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "compare_strings":
            return {k.arg: k.value for k in node.keywords if k.arg}
    return {}


def _cases_of(name: str, tree: ast.Module) -> list[Case]:
    out: list[Case] = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        kwargs = _call_kwargs(fn)
        for deco in fn.decorator_list:
            if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize"):
                continue
            names = [n.strip() for n in ast.literal_eval(deco.args[0]).split(",")]
            if "gold" not in names or "pred" not in names:
                continue
            want = "expected" if "expected" in names else "result"
            if want not in names:
                continue
            try:
                rows = ast.literal_eval(deco.args[1])
            except ValueError:
                continue
            for row in rows:
                r = dict(zip(names, row, strict=True))
                precision = r.get("precision", 6)
                prec_node = kwargs.get("precision")
                if isinstance(prec_node, ast.Constant):
                    precision = prec_node.value
                strict = r.get("strict", True)
                if r.get("allow_set_relation_comp", False):
                    continue  # a Math-Verify option, not a fact about the answers
                types = kwargs.get("match_types")
                latex_only = isinstance(types, ast.List) and len(types.elts) == 1
                out.append(
                    Case(
                        f"{name}::{fn.name}",
                        str(r["gold"]),
                        str(r["pred"]),
                        bool(r[want]),
                        int(precision),
                        bool(strict),
                        latex_only,
                    )
                )
    return out


def load_cases(cache_dir: Path = CACHE_DIR) -> list[Case]:
    """Every (gold, pred, expected) case of the sdist's tests, in file order.

    Returns:
        The cases (several hundred).
    """
    path = ensure_sdist(cache_dir)
    out: list[Case] = []
    with tarfile.open(path) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            parts = Path(member.name).parts
            if len(parts) < 3 or parts[1] != "tests" or not member.name.endswith(".py"):
                continue
            f = tar.extractfile(member)
            if f is None:
                continue
            tree = ast.parse(f.read().decode("utf-8"))
            out.extend(_cases_of(Path(member.name).name, tree))
    return out
