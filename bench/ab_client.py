"""The client's side of the verify path, A/B over commits: one certd, clients of each commit.

``bench/ab_restructure.py`` compares whole trees (each side its own server); the client's CPU
per verdict moved there while the server's did not. This holds the server fixed (this tree's,
Countdown only) and runs, round by round in rotating order, a child process per commit whose
``PYTHONPATH`` holds that commit's ``forkgate`` and ``certd`` (``git archive``; the child
records the files it imported). Each child times, over ``bench_verify.py``'s 2,000 answers:
``verify_batch`` (1,000 per call, ``REPEATS`` calls; typed verdicts after issue 34),
``verify_batch_pb`` where the commit has it (else ``verify_batch``, which returned protobufs),
and unary ``verify`` of the first ``UNARY`` answers: wall seconds and the child's CPU seconds
(``process_time``, gRPC's threads included).

Run: ``.venv/bin/python bench/ab_client.py --commits 5be5257,e459594,HEAD --rounds 8``
→ ``bench/results/ab_client.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import write
from compare_certify import _archive, _layout, _loadavg

ROOT = Path(__file__).resolve().parent.parent
REPEATS = 5
UNARY = 300


def child(address: str) -> None:
    """Time this commit's client against ``address``; print one JSON line."""
    import warnings

    warnings.simplefilter("ignore", DeprecationWarning)  # the flat task form, on both sides
    import bench_verify

    import certd
    import forkgate
    from forkgate import CertdClient, VerifyItem

    pairs = bench_verify.answers()
    items = [VerifyItem(p, f"<answer>{a}</answer>", str(i)) for i, (p, a) in enumerate(pairs)]
    out: dict[str, Any] = {"imported": [certd.__file__, forkgate.__file__]}
    with CertdClient(address) as client:
        client.verify_batch(items[:1000])  # warm-up: the channel
        as_pb = getattr(client, "verify_batch_pb", client.verify_batch)

        def unary() -> None:
            for item in items[:UNARY]:
                client.verify(item.task, item.response, item.id)

        for name, fn, n, repeats in (
            ("verify_batch_1000", lambda: client.verify_batch(items), len(items), REPEATS),
            ("verify_batch_1000_pb", lambda: as_pb(items), len(items), REPEATS),
            ("verify_unary", unary, UNARY, 1),
        ):
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(repeats):
                fn()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            out[name] = {
                "per_s": n * repeats / wall,
                "client_cpu_us_per_item": 1e6 * cpu / (n * repeats),
            }
    print(json.dumps(out))


def _rounds(commits: list[str], rounds: int, address: str, tmp: Path) -> dict[str, list[Any]]:
    layouts = {
        c: _layout(_archive(c, tmp / f"tree-{c}"), tmp / f"path-{c}")
        for c in dict.fromkeys(commits)
    }
    runs: dict[str, list[Any]] = {c: [] for c in layouts}
    for r in range(rounds):
        order = list(layouts)[r % len(layouts) :] + list(layouts)[: r % len(layouts)]
        for c in order:
            got = subprocess.run(
                [sys.executable, __file__, "--child", address],
                env=dict(os.environ, PYTHONPATH=str(layouts[c])),
                cwd=str(layouts[c]),
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            ).stdout
            result = json.loads(got.strip().splitlines()[-1])
            result["loadavg"] = _loadavg()
            runs[c].append(result)
            print(f"round {r} {c}: {result}", file=sys.stderr)
    return runs


def _summary(runs: dict[str, list[Any]], base: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for row in ("verify_batch_1000", "verify_batch_1000_pb", "verify_unary"):
        for metric in ("per_s", "client_cpu_us_per_item"):
            med = {c: statistics.median(g[row][metric] for g in gs) for c, gs in runs.items()}
            out[f"{row}.{metric}"] = {
                "median": {c: round(m, 3) for c, m in med.items()},
                "over_base": {c: round(m / med[base], 3) for c, m in med.items()},
                "per_round": {c: [round(g[row][metric], 3) for g in gs] for c, gs in runs.items()},
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", default="5be5257,HEAD")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", default="ab_client")
    parser.add_argument("--child", metavar="ADDRESS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    from forkgate.local import LocalCertd

    commits = [
        subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", c],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        for c in args.commits.split(",")
    ]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps({"math": {"enabled": False}}))
        with LocalCertd(Path(tmp) / "d", config=config) as server:
            runs = _rounds(commits, args.rounds, server.address, Path(tmp))
    write(
        args.out,
        {
            "commits": commits,
            "server": "this tree's certd serve, math disabled, one for every client",
            "rounds": args.rounds,
            "command": " ".join([".venv/bin/python bench/ab_client.py", *sys.argv[1:]]),
            "imported": {c: gs[0]["imported"] for c, gs in runs.items()},
            "loadavg_after_each_child": {c: [g["loadavg"] for g in gs] for c, gs in runs.items()},
            "results": _summary(runs, commits[0]),
        },
    )


if __name__ == "__main__":
    main()
