"""``certd audit`` of one ledger by two source trees side by side, interleaved (A/B).

Builds an N-entry data dir as ``bench_ledger.py`` does (once), ``git archive``s the base
commit and the head commit (so edits in progress never leak in; each tree's C extensions
compiled in it), then runs the real command
``certd audit --data-dir`` round by round: base, head, head without the ed25519-dalek fast
path (solders hidden; ``--no-dalek-variant`` skips it), then the same in reverse order, ...
so every variant sees the same machine load. Each run
is timed for wall seconds and the CPU seconds of its whole process tree (the audit, its
forkserver and workers: ``bench_ledger._tree_cpu_seconds``). The medians and the ratios to
the base go to ``bench/results/<out>.json``.

Run: ``.venv/bin/python bench/compare_audit.py --base 13591cf --head HEAD --entries 100000
--rounds 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from _common import write
from bench_ledger import _count_descendants, _tree_cpu_seconds, build_store

from certd.ledger.log import Ledger

ROOT = Path(__file__).resolve().parents[1]


def _build(data: Path, n: int) -> None:
    key, _, store, _ = build_store(data, n)
    Ledger(store, key, "bench.local/certd").close()


def _tree(commit: str, into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "certd"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    for source in into.rglob("*.c"):  # its C extensions, built in place as `make setup` does
        target = source.parent / (source.stem + sysconfig.get_config_var("EXT_SUFFIX"))
        include = sysconfig.get_paths()["include"]
        cc = ["gcc", "-O3", "-shared", "-fPIC", f"-I{include}", str(source), "-o", str(target)]
        subprocess.run(cc, check=True)
    return into


def _run(path: str, data: Path, state: Path) -> tuple[float, float]:
    env_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = path
    try:
        state.unlink(missing_ok=True)
        # -P: without it ``-m`` puts the current directory first on sys.path, and run from a
        # checkout every variant would import that checkout's certd, not its own tree.
        cmd = [sys.executable, "-P", "-m", "certd.cli", "audit", "--data-dir", str(data)]
        done, wall, cpu = _tree_cpu_seconds([*cmd, "--state", str(state), "--json"])
    finally:
        if env_path is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = env_path
    report = json.loads(done.stdout)
    assert report["ok"], done.stdout[:2000] + done.stderr[-2000:]
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--base", required=True)
    ap.add_argument("--head", default="HEAD")
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="audit_ab")
    ap.add_argument("--no-dalek-variant", action="store_true", help="skip head-no-dalek")
    args = ap.parse_args()
    assert _count_descendants(), "needs Linux (child subreaper) to count the workers' CPU"
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        _build(tmp / "data", args.entries)
        base, head = _tree(args.base, tmp / "base"), _tree(args.head, tmp / "head")
        hide = tmp / "hide" / "solders"
        hide.mkdir(parents=True)
        (hide / "__init__.py").write_text('raise ImportError("hidden: no dalek fast path")\n')
        variants = {
            "base": str(base),
            "head": str(head),
            "head-no-dalek": f"{hide.parent}{os.pathsep}{head}",
        }
        if args.no_dalek_variant:
            del variants["head-no-dalek"]
        runs: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
        for r in range(args.rounds):
            order = list(variants.items())
            for name, path in order if r % 2 == 0 else order[::-1]:  # base first every other
                wall, cpu = _run(path, tmp / "data", tmp / "state.json")
                runs[name].append((wall, cpu))
                print(f"round {r} {name:14s} wall {wall:6.2f} s  cpu {cpu:6.2f} s", flush=True)
    med = {
        v: {
            "wall_s": statistics.median(w for w, _ in rs),
            "cpu_s": statistics.median(c for _, c in rs),
            "runs": [[round(w, 2), round(c, 2)] for w, c in rs],
        }
        for v, rs in runs.items()
    }
    for m in med.values():
        m["wall_vs_base"] = round(m["wall_s"] / med["base"]["wall_s"], 3)
        m["cpu_vs_base"] = round(m["cpu_s"] / med["base"]["cpu_s"], 3)
        m["wall_s"], m["cpu_s"] = round(m["wall_s"], 2), round(m["cpu_s"], 2)
    result = {
        "entries": args.entries,
        "base": args.base,
        "head": args.head,
        "rounds": args.rounds,
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
        "medians": med,
    }
    print(json.dumps(result, indent=2))
    write(args.out, result)


if __name__ == "__main__":
    main()
