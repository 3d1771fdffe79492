"""Client CPU of ``TypedVerdict.of`` (what ``verify_batch`` adds per verdict): a base commit's
``client/verdicts.py`` against this tree's, interleaved in one process.

Since issue 34's restructuring ``CertdClient.verify_batch`` returns typed verdicts;
``bench/ab_restructure.py`` measured the client's CPU per verdict up from 8 to 12 µs. This
times the conversion alone: 2,000 protobuf verdicts (three statuses, half with a family) per
call, base and head alternating for ``ROUNDS`` calls each, CPU time (``process_time``).

Run: ``.venv/bin/python bench/bench_typed_verdict.py --base e459594``
→ ``bench/results/typed_verdict.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from _common import write

from certd.v1 import verifier_pb2
from forkgate import verdicts as head

ROOT = Path(__file__).resolve().parent.parent
N = 2000
ROUNDS = 41


def _base_module(commit: str, tmp: Path) -> ModuleType:
    """``client/verdicts.py`` of ``commit``, imported as ``verdicts_base``."""
    path = tmp / "verdicts_base.py"
    source = ["git", "-C", str(ROOT), "show", f"{commit}:client/verdicts.py"]
    path.write_text(subprocess.run(source, check=True, capture_output=True, text=True).stdout)
    spec = importlib.util.spec_from_file_location("verdicts_base", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["verdicts_base"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _verdicts() -> list[verifier_pb2.Verdict]:
    out = []
    for i in range(N):
        v = verifier_pb2.Verdict(
            id=str(i), status=1 + i % 3, reward=1.0, detail="ok", verifier="countdown@1"
        )
        if i % 2:
            v.family.value, v.family.kappa = "25,-", "countdown.first-op.v1"
        out.append(v)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="e459594")
    args = parser.parse_args()
    vs = _verdicts()
    with tempfile.TemporaryDirectory() as tmp:
        base = _base_module(args.base, Path(tmp))
        same = [base.TypedVerdict.of(v).status.value for v in vs] == [
            head.TypedVerdict.of(v).status.value for v in vs
        ]
        cpu: dict[str, list[float]] = {"base": [], "head": []}
        for r in range(ROUNDS):
            order = (
                (("base", base), ("head", head)) if r % 2 == 0 else (("head", head), ("base", base))
            )
            for name, module in order:
                t0 = time.process_time()
                for v in vs:
                    module.TypedVerdict.of(v)
                cpu[name].append(time.process_time() - t0)
    med = {k: statistics.median(x) for k, x in cpu.items()}
    pairs = [h / b for b, h in zip(cpu["base"], cpu["head"], strict=True)]
    write(
        "typed_verdict",
        {
            "base_commit": args.base,
            "verdicts_per_call": N,
            "rounds": ROUNDS,
            "same_statuses": same,
            "median_us_per_verdict": {k: round(1e6 * m / N, 3) for k, m in med.items()},
            "head_over_base": round(med["head"] / med["base"], 3),
            "median_of_per_round_ratios": round(statistics.median(pairs), 3),
            "command": " ".join([".venv/bin/python bench/bench_typed_verdict.py", *sys.argv[1:]]),
        },
    )


if __name__ == "__main__":
    main()
