"""Merge the per-process files of ``FORKGATE_CPU_REPORT=dir`` (tests/cpu_accounting.py) into
one table, most CPU first.

Usage: ``FORKGATE_CPU_REPORT=/tmp/cpu make unit`` (or any pytest run), then
``python scripts/module_cpu.py /tmp/cpu [N]`` prints the N (default 40) modules that spent the
most CPU, with their wall seconds and the total, and writes ``dir/modules.json``.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def merged(folder: Path) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = defaultdict(lambda: {"cpu_s": 0.0, "wall_s": 0.0})
    for part in sorted(folder.glob("cpu-*.json")):
        for module, row in json.loads(part.read_text()).items():
            table[module]["cpu_s"] += row["cpu_s"]
            table[module]["wall_s"] += row["wall_s"]
    return dict(sorted(table.items(), key=lambda kv: -kv[1]["cpu_s"]))


def main(folder: str, top: int = 40) -> None:
    table = merged(Path(folder))
    (Path(folder) / "modules.json").write_text(json.dumps(table, indent=1) + "\n")
    cpu = sum(r["cpu_s"] for r in table.values())
    wall = sum(r["wall_s"] for r in table.values())
    print(f"{len(table)} modules: {cpu:.0f} CPU-s, {wall:.0f} s of test time")
    for module, row in list(table.items())[:top]:
        print(f"{row['cpu_s']:8.1f} CPU-s {row['wall_s']:8.1f} s  {module}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
