"""Run every benchmark in its own process and collect the JSON results.

Run: ``make bench`` (or ``.venv/bin/python bench/run_all.py``) → ``bench/results/*.json`` and
``bench/results/summary.json``. Takes about five minutes on a 2-core machine, most of it the
1,000,000-entry ledger build and audit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = (
    "bench_verify",
    "bench_verify_batch",
    "bench_enumerate",
    "bench_certify",
    "bench_ledger",
    "bench_advantages",
    "bench_code",
    "bench_math",
    "bench_math_startup",
    "bench_ratchet_groups",
    "bench_cluster",
    "bench_fairness",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--summary-only",
        action="store_true",
        help="run nothing; rebuild summary.json from the JSON results already there",
    )
    ns = parser.parse_args()
    failed = []
    for name in () if ns.summary_only else BENCHES:
        print(f"== {name}", flush=True)
        run = subprocess.run([sys.executable, str(HERE / f"{name}.py")], cwd=HERE, check=False)
        if run.returncode != 0:
            failed.append(name)
    results = {}
    for path in sorted((HERE / "results").glob("*.json")):
        if path.name != "summary.json":
            doc = json.loads(path.read_text())
            results[doc["benchmark"]] = doc
    summary = {
        name: {k: v for k, v in doc.items() if k in ("target", "targets")}
        for name, doc in results.items()
    }
    (HERE / "results" / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
