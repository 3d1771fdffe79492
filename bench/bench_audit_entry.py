"""CPU per entry of the audit's worker loop, two source trees side by side (A/B, interleaved).

Signs ``--entries`` feasibility envelopes as ``bench_ledger.py`` does (once, with this tree),
``git archive``s the base and head commits (so edits in progress never leak in), then runs,
round by round and alternating base and head, a fresh process per tree that times (process
CPU, best of 5 passes, the loops interleaved) what a worker does to each entry:
``verify_signatures`` (envelope parse, ``open_envelope``: key, signature, statement,
predicate shape; the signer runs) and the leaf hash; beside it the bare Ed25519 verify of
the same signatures, so the rest (total − verify) is the part a parser change can move; and
``Envelope.from_json`` alone. Medians over rounds and the head/base ratios (median of the
per-round ratios) go to ``bench/results/<out>.json``. ``--callgrind N1,N2`` counts
instructions per entry instead (load-independent; valgrind hides AVX-512, so SIMD code
such as pybase64's takes another path there than on the machine).

Run: ``.venv/bin/python bench/bench_audit_entry.py --base main --head HEAD --entries 2000
--rounds 5``.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import write
from bench_ledger import envelopes
from compare_audit import _tree

from certd.signing.keys import SigningKey

_CHILD = """
import pickle, sys, time
from certd.ledger.auditchunk import verify_signatures
from certd.signing.dsse import Envelope, KeyRing
from certd.signing.keys import VerifierKey, enable_fast_verify
from certd.tlog import leaf_hash
enable_fast_verify()
vkey, envs = pickle.load(open(sys.argv[1], "rb"))
key = VerifierKey.from_vkey(vkey)
ring = KeyRing([key])
pairs = [(e.pae(), e.signatures[0].sig) for e in map(Envelope.from_json, envs)]
def entry_loop():
    faults, _, _ = verify_signatures(0, envs, ring)
    assert not faults, faults[:1]
    [leaf_hash(e) for e in envs]
def bare_verify():
    [key.verify(m, s) for m, s in pairs]
def envelope_parse():
    [Envelope.from_json(e) for e in envs]
def best(*fs):
    times = [[] for _ in fs]
    for _ in range(6):  # interleaved; the first pass warms up
        for f, acc in zip(fs, times):
            t0 = time.process_time()
            f()
            acc.append(time.process_time() - t0)
    return [min(acc[1:]) / len(envs) * 1e6 for acc in times]
if len(sys.argv) > 2:  # under callgrind: one pass over the first n entries, no timing
    n = int(sys.argv[2])
    envs, pairs = envs[:n], pairs[:n]
    (entry_loop if sys.argv[3] == "entry" else bare_verify)()
else:
    print(*best(entry_loop, bare_verify, envelope_parse))
"""


def _child(tree: Path, data: Path) -> tuple[float, float, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        # -P: ``-c`` would put the current directory (a checkout) first on sys.path.
        [sys.executable, "-P", "-c", _CHILD, str(data)],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    total, verify, parse = (float(x) for x in out.stdout.split())
    return total, verify, parse


def _instructions(tree: Path, data: Path, n: int, what: str) -> int:
    """Instructions (callgrind Ir) of a child that makes one pass of ``what`` over ``n``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-P"]
        done = subprocess.run(
            [*cmd, "-c", _CHILD, str(data), str(n), what], env=env, capture_output=True, text=True
        )
        if done.returncode:
            raise SystemExit(done.stderr[-2000:])
        for line in out.read_text().splitlines():
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise SystemExit("callgrind wrote no totals")


def _callgrind(trees: dict[str, Path], data: Path, n1: int, n2: int) -> dict[str, object]:
    """Instructions per entry, (Ir at n2 entries − Ir at n1) / (n2 − n1), per tree: the
    worker loop and the bare verify. Load-independent, so one run each suffices."""
    out: dict[str, object] = {"entries": [n1, n2]}
    for name, tree in trees.items():
        row = {}
        for what in ("entry", "verify"):
            lo, hi = _instructions(tree, data, n1, what), _instructions(tree, data, n2, what)
            row[what] = (hi - lo) // (n2 - n1)
        row["rest"] = row["entry"] - row["verify"]
        out[name] = row
        print(name, row, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--base", default="main")
    ap.add_argument("--head", default="HEAD")
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="audit_entry_ab")
    ap.add_argument("--callgrind", metavar="N1,N2", help="instructions per entry instead")
    args = ap.parse_args()
    key = SigningKey.generate("bench.local/certd")
    runs: dict[str, list[tuple[float, float, float]]] = {"base": [], "head": []}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "envelopes.pickle"
        data.write_bytes(pickle.dumps((key.verifier().to_vkey(), envelopes(key, args.entries))))
        trees = {
            "base": _tree(args.base, Path(tmp) / "base"),
            "head": _tree(args.head, Path(tmp) / "head"),
        }
        if args.callgrind:
            n1, n2 = (int(x) for x in args.callgrind.split(","))
            write(
                args.out, {"base": args.base, "head": args.head, **_callgrind(trees, data, n1, n2)}
            )
            return
        for r in range(args.rounds):
            for name in ("base", "head") if r % 2 == 0 else ("head", "base"):
                runs[name].append(_child(trees[name], data))
                print(name, [round(x, 2) for x in runs[name][-1]], flush=True)
    result: dict[str, object] = {
        "entries": args.entries,
        "rounds": args.rounds,
        "base": args.base,
        "head": args.head,
        "loadavg_1m_end": round(os.getloadavg()[0], 2),
    }
    for name, rows in runs.items():
        result[name] = {
            "us_per_entry": round(statistics.median(t for t, _, _ in rows), 2),
            "us_verify": round(statistics.median(v for _, v, _ in rows), 2),
            "us_rest": round(statistics.median(t - v for t, v, _ in rows), 2),
            "us_envelope_parse": round(statistics.median(e for _, _, e in rows), 2),
            "rounds": [[round(x, 2) for x in row] for row in rows],
        }
    pairs = list(zip(runs["base"], runs["head"], strict=True))
    for what, f in {
        "per_entry": lambda r: r[0],
        "rest": lambda r: r[0] - r[1],
        "envelope_parse": lambda r: r[2],
    }.items():
        ratio = statistics.median(f(h) / f(b) for b, h in pairs)
        result[f"head_over_base_{what}"] = round(ratio, 3)
    write(args.out, result)


if __name__ == "__main__":
    main()
