"""The verify and certify paths of two source trees, A/B in one run (issue 34's "within noise").

Each side is a ``git archive`` of its commit (edits in progress never leak in) run in a child
process whose ``PYTHONPATH`` holds that tree's ``certd``, ``forkgate`` and ``sandboxes``; the
child records the files it imported, so a run shows each side ran its own code. Rounds
alternate the order (before, after; after, before; …) so a drift in load falls on both sides.

One child measures, on one ``certd serve`` of its own tree (Countdown only, ``math.enabled:
false``, so no math warm-up competes for the cores), with its own tree's client:

* controls, code identical at both commits: reasoning-gym's Countdown ``score_answer`` and
  certd's ``verify_countdown``, in process, over the 2,000 answers of ``bench_verify.py``;
  their after/before ratios are this machine's noise;
* ``VerifyBatch`` (1,000 per call) of those answers, then the same with the client checking
  receipts (``trusted_keys``), then unary ``Verify`` for the first ``UNARY_VERIFY`` answers;
* ``CertifyBatch`` of 2 × 1,000 distinct (task, label, witness) requests (``bench_certify.py``'s
  puzzles), then unary ``Certify`` of the next ``UNARY_CERTIFY`` requests.

Beside each rate, the server's CPU (its process tree, from ``/proc``) per 1,000 items, which
load inflates far less than wall time; and the load average around every child.

Run: ``.venv/bin/python bench/ab_restructure.py --before 5be5257 --after HEAD --rounds 4
--out ab_restructure_head`` → ``bench/results/ab_restructure_head.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import certify_requests, write
from compare_certify import _archive, _cpu_s, _layout, _loadavg, run_child

ROOT = Path(__file__).resolve().parent.parent
REPEATS = 5
UNARY_VERIFY = 300
UNARY_CERTIFY = 300
CERTIFY_BATCH = 1000
CONTROLS = ("control_reasoning_gym_in_process", "control_verify_countdown_in_process")


def _row(fn: Callable[[], object], repeats: int, n: int, pid: int) -> dict[str, float]:
    """``repeats`` calls of ``fn``, each handling ``n`` items: items per second (from the
    median call), and CPU seconds per 1,000 items of the server (its process tree) and of this
    client process (gRPC's threads included), over all the calls."""
    server0, client0 = _cpu_s(pid), time.process_time()
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    server, client = _cpu_s(pid) - server0, time.process_time() - client0
    return {
        "per_s": n / statistics.median(walls),
        "server_cpu_s_per_1000": 1000 * server / (n * repeats),
        "client_cpu_s_per_1000": 1000 * client / (n * repeats),
    }


def _in_process(fn: Callable[[], object], n: int) -> dict[str, float]:
    walls = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return {"per_s": n / statistics.median(walls)}


def _controls(pairs: list[Any], responses: list[str], out: dict[str, Any]) -> None:
    """The in-process rows whose code is the same at both commits."""
    import reasoning_gym

    from certd.domains import countdown as cd

    rg = reasoning_gym.create_dataset("countdown", size=1, seed=0)
    entries = [{"metadata": {"numbers": p["numbers"], "target": p["target"]}} for p, _ in pairs]
    tasks = [
        cd.CountdownTask(numbers=tuple(p["numbers"]), target=int(p["target"])) for p, _ in pairs
    ]

    def run_rg() -> None:
        for (_, a), entry in zip(pairs, entries, strict=True):
            rg.score_answer(a, entry)

    def run_ours() -> None:
        for t, r in zip(tasks, responses, strict=True):
            cd.verify_countdown(t, r)

    out[CONTROLS[0]] = _in_process(run_rg, len(pairs))
    out[CONTROLS[1]] = _in_process(run_ours, len(pairs))


def _verify_rows(address: str, vkey: str, pid: int, items: list[Any], out: dict[str, Any]) -> None:
    """VerifyBatch (typed verdicts, protobuf verdicts, receipts checked) and unary Verify."""
    from forkgate import CertdClient

    n = len(items)
    with CertdClient(address) as client:
        client.verify_batch(items[:1000])  # warm-up: the verify pool, the channel
        out["verify_batch_1000"] = _row(lambda: client.verify_batch(items), REPEATS, n, pid)
        # Before the restructuring verify_batch returned protobufs; after, verify_batch_pb does.
        as_pb = getattr(client, "verify_batch_pb", client.verify_batch)
        out["verify_batch_1000_pb"] = _row(lambda: as_pb(items), REPEATS, n, pid)
        unary = items[:UNARY_VERIFY]

        def one_by_one() -> None:
            for item in unary:
                client.verify(item.task, item.response, item.id)

        out["verify_unary"] = _row(one_by_one, 3, len(unary), pid)
    with CertdClient(address, trusted_keys=[vkey]) as client:
        verify = client.verify_batch
        out["verify_batch_1000_receipts_checked"] = _row(lambda: verify(items), REPEATS, n, pid)


def _certify_rows(address: str, pid: int, reqs: list[Any], out: dict[str, Any]) -> None:
    """CertifyBatch of two batches of 1,000, then unary Certify of the next requests."""
    from forkgate import CertdClient, CertificationRefusedError

    batches = iter([reqs[:CERTIFY_BATCH], reqs[CERTIFY_BATCH : 2 * CERTIFY_BATCH]])
    unary = reqs[2 * CERTIFY_BATCH :][:UNARY_CERTIFY]
    assert len(unary) == UNARY_CERTIFY, len(reqs)
    with CertdClient(address) as client:

        def one_batch() -> None:
            results = client.certify_batch(next(batches))
            refused = [r for r in results if isinstance(r, CertificationRefusedError)]
            assert not refused, refused[:3]

        def one_by_one() -> None:
            for task, label, witness in unary:
                client.certify(task, label, witness)

        out["certify_batch_1000"] = _row(one_batch, 2, CERTIFY_BATCH, pid)
        out["certify_unary"] = _row(one_by_one, 1, len(unary), pid)


def child() -> None:
    """Measure this tree (the one on ``PYTHONPATH``); print one JSON line."""
    import bench_verify

    import certd
    import forkgate
    import sandboxes
    from forkgate import VerifyItem
    from forkgate.local import LocalCertd

    out: dict[str, Any] = {
        "imported": {m.__name__: m.__file__ for m in (certd, forkgate, sandboxes)},
        "loadavg": [_loadavg()],
    }
    pairs = bench_verify.answers()
    responses = [f"<answer>{a}</answer>" for _, a in pairs]
    items = [VerifyItem(p, r, str(i)) for i, (p, _) in enumerate(pairs) for r in [responses[i]]]
    reqs = certify_requests(2500, seed=21)
    _controls(pairs, responses, out)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps({"math": {"enabled": False}}))
        with LocalCertd(Path(tmp) / "d", config=config) as server:
            pid = server.process.pid
            _verify_rows(server.address, server.vkey, pid, items, out)
            _certify_rows(server.address, pid, reqs, out)
    out["loadavg"].append(_loadavg())
    print(json.dumps(out))


def _measure(layout: Path) -> dict[str, Any]:
    return dict(run_child(__file__, layout, []))


def _rounds(
    commits: dict[str, str], rounds: int, save: Callable[[dict[str, Any], int], object]
) -> None:
    """Every side's measurements, saved after each round; the order alternates by round."""
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        layouts = {
            side: _layout(_archive(commit, Path(tmp) / side), Path(tmp) / f"{side}-path")
            for side, commit in commits.items()
        }
        for r in range(rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for side in order:
                got = _measure(layouts[side])
                got["round"], got["when"] = r, time.strftime("%H:%M:%S", time.gmtime())
                runs[side].append(got)
                rates = {k: round(v["per_s"], 1) for k, v in got.items() if _is_row(v)}
                print(f"round {r} {side}: {rates} load {got['loadavg']}", file=sys.stderr)
            save(runs, r + 1)


def _is_row(value: object) -> bool:
    return isinstance(value, dict) and "per_s" in value


def _summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians, after/before ratios and per-round ratios of every row."""
    rows = [k for k, v in runs["before"][0].items() if _is_row(v)]
    out: dict[str, Any] = {}
    for row in rows:
        entry: dict[str, Any] = {}
        for metric in ("per_s", "server_cpu_s_per_1000", "client_cpu_s_per_1000"):
            if metric not in runs["before"][0][row]:
                continue
            b = [g[row][metric] for g in runs["before"]]
            a = [g[row][metric] for g in runs["after"]]
            mb, ma = statistics.median(b), statistics.median(a)
            entry[metric] = {
                "before": [round(x, 4) for x in b],
                "after": [round(x, 4) for x in a],
                "median_before": round(mb, 4),
                "median_after": round(ma, 4),
                "after_over_before": round(ma / mb, 3),
                "per_round_after_over_before": [round(y / x, 3) for x, y in zip(b, a, strict=True)],
                "median_of_per_round_ratios": round(
                    statistics.median(y / x for x, y in zip(b, a, strict=True)), 3
                ),
            }
        out[row] = entry
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="5be5257")
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default="ab_restructure_head", help="bench/results/OUT.json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    sha = {
        side: subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", c],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        for side, c in (("before", args.before), ("after", args.after))
    }
    _rounds(sha, args.rounds, lambda runs, done: _save(args, sha, runs, done))


def _save(args: argparse.Namespace, sha: dict[str, str], runs: dict[str, Any], done: int) -> None:
    """Write the results of the rounds done so far (a run cut short keeps them)."""
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        _write(args, sha, runs, done)


def _write(args: argparse.Namespace, sha: dict[str, str], runs: dict[str, Any], done: int) -> None:
    write(
        args.out,
        {
            "before_commit": sha["before"],
            "after_commit": sha["after"],
            "rounds": done,
            "rounds_asked": args.rounds,
            "order": "before, after in even rounds; after, before in odd rounds",
            "controls": list(CONTROLS),
            "command": " ".join([".venv/bin/python bench/ab_restructure.py", *sys.argv[1:]]),
            "imported": {side: gs[0]["imported"] for side, gs in runs.items()},
            "loadavg_before_after_each_child": {
                side: [[g["when"], *g["loadavg"]] for g in gs] for side, gs in runs.items()
            },
            "results": _summary(runs),
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
