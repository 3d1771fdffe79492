"""Write tests/module_seconds.json from a pytest JUnit XML: each test module's seconds.

Usage: ``pytest … --junitxml=run.xml`` then ``python scripts/module_seconds.py run.xml``, or
``FORKGATE_CPU_REPORT=dir make test`` then ``python scripts/module_seconds.py dir``.
tests/conftest.py starts the slowest modules first with it (``make unit``); modules under
one second are left out (they keep their collection order, after the listed ones).
The committed table comes from one whole ``make test`` of a fresh clone on this 2-core machine,
nothing else running (``FORKGATE_CPU_REPORT``, at 030e80e); the order is what counts.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "module_seconds.json"


def module_of(classname: str) -> str | None:
    """``tests.unit.test_x.TestY`` -> ``tests/unit/test_x.py`` (the longest prefix that is a
    file here), or None."""
    parts = classname.split(".")
    for k in range(len(parts), 0, -1):
        path = "/".join(parts[:k]) + ".py"
        if (ROOT / path).is_file():
            return path
    return None


def from_junit(xml_path: Path) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        module = module_of(case.get("classname", ""))
        if module is not None:
            totals[module] += float(case.get("time", "0"))
    return totals


def from_cpu_report(folder: Path) -> dict[str, float]:
    """The modules' test seconds from ``FORKGATE_CPU_REPORT=folder`` (tests/cpu_accounting.py)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from module_cpu import merged

    return {module: row["wall_s"] for module, row in merged(folder).items()}


def main(source: str) -> None:
    path = Path(source)
    totals = from_cpu_report(path) if path.is_dir() else from_junit(path)
    table = {m: round(s, 1) for m, s in sorted(totals.items(), key=lambda kv: -kv[1]) if s >= 1}
    OUT.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(table)} modules, {sum(table.values()):.0f} s")


if __name__ == "__main__":
    main(sys.argv[1])
