"""One meaning per module name: two modules share a name only when they are the same kind of part.

A name read in a traceback, an import or a review should say which thing it is. Shared names are
allowed only for the parallel parts listed here (each domain's ``task``/``verify``/…, each
package's ``errors``, each program's ``cli``); any other repeat is a new module named after
something else already in the tree.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PARALLEL = {
    "errors.py": "each package's one errors module (STYLE.md rule 1)",
    "cli.py": "each program's command line (certd, forkgate)",
    "canonical.py": "a domain's canonical solution form",
    "extract.py": "a domain's answer extraction",
    "kappa.py": "a domain's κ",
    "limits.py": "a domain's or the sandbox's resource limits",
    "names.py": "a domain's names",
    "task.py": "a domain's task type",
    "verify.py": "a domain's verify function",
    "spec.py": "a domain's registry entry (certd.domains.registry)",
    "first_step.py": "a domain's first-step rule for the learned κ",
    "config.py": "a domain's config section (certd.config assembles them with the core ones)",
}


def test_no_two_modules_share_a_name_unless_parallel() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for package in ("certd", "client", "sandboxes"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name != "__init__.py" and "v1" not in path.parts:
                where[path.name].append(str(path.relative_to(ROOT)))
    repeated = {name: sorted(paths) for name, paths in where.items() if len(paths) > 1}
    assert set(repeated) <= set(PARALLEL), {n: p for n, p in repeated.items() if n not in PARALLEL}
