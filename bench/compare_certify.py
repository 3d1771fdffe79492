"""CertifyBatch throughput of two source trees side by side in one run (regression hunting).

``bench_certify.py`` measures one tree; this runs the same measurement for a base commit and
a head commit (both ``git archive``'d, so edits in progress never leak in), interleaved round
by round (base, head, base, head, ...), so both see the same machine load. Each measurement
is a child process whose ``PYTHONPATH`` points at its tree's ``certd``, ``forkgate`` and
``sandboxes``. Variants of the head tree:

* ``head``: the server as ``bench_certify.py`` starts it (timing begins at once);
* ``head-ready``: timing begins once the server reports every health service SERVING (the
  math domain's warm-up, which loads the first-step embedding model in the server process, is
  over);
* ``head-no-math``: the math domain disabled in the server's config (what ``bench_certify.py``
  runs); ``base-no-math`` the same for the base tree.

Besides certificates per second, each measurement reads the CPU time of the server process and
its children from ``/proc`` (utime + stime) and of the client process over the timed batches:
CPU-seconds per 1,000 certificates, which load on a shared machine inflates far less than the
rate. The load average is recorded at each measurement.

Run: ``.venv/bin/python bench/compare_certify.py --base 86c1122 --rounds 3``
→ ``bench/results/certify_regression.json`` (``--out NAME`` for another file name).
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

ROOT = Path(__file__).resolve().parent.parent
BATCH = 1000
PUZZLES = 2500


def _layout(tree: Path, into: Path) -> Path:
    """A directory whose ``certd``, ``forkgate`` and ``sandboxes`` are the tree's packages."""
    into.mkdir(parents=True, exist_ok=True)
    for name, src in (("certd", "certd"), ("forkgate", "client"), ("sandboxes", "sandboxes")):
        (into / name).symlink_to(tree / src)
    return into


def _archive(commit: str, into: Path) -> Path:
    """The tree of ``commit``, extracted into ``into``."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _wait_ready(address: str, timeout_s: float = 300.0) -> float:
    """Block until the server's overall health and every domain service is SERVING."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    t0 = time.perf_counter()
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "certd.v1.Verifier/math"):
            while True:
                try:
                    reply = stub.Check(health_pb2.HealthCheckRequest(service=service))
                except grpc.RpcError as e:
                    if e.code() == grpc.StatusCode.NOT_FOUND:  # an older server: no such service
                        break
                    raise
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    break
                if time.perf_counter() - t0 > timeout_s:
                    raise TimeoutError(f"{service or 'server'} not SERVING after {timeout_s} s")
                time.sleep(0.2)
    return time.perf_counter() - t0


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a process and its live descendants (the verify pool's
    workers are the forkserver's children), from ``/proc``."""
    pids, at = [pid], 0
    while at < len(pids):
        try:
            for task in os.listdir(f"/proc/{pids[at]}/task"):
                with open(f"/proc/{pids[at]}/task/{task}/children") as f:
                    pids += [int(c) for c in f.read().split()]
        except FileNotFoundError:  # ended meanwhile
            pass
        at += 1
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # a child that ended meanwhile
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def child(wait_ready: bool, no_math: bool) -> None:
    """Measure in this process's tree; print one JSON line."""
    sys.path.insert(0, str(ROOT / "bench"))
    from _common import certify_requests

    from forkgate import CertdClient, CertificationRefusedError
    from forkgate.local import LocalCertd

    reqs = certify_requests(PUZZLES, seed=21)
    rates: list[float] = []
    waited = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        config = None
        if no_math:
            config = Path(tmp) / "config.json"
            config.write_text(json.dumps({"math": {"enabled": False}}))
        extra = {"config": config} if config is not None else {}  # base: no such argument
        with LocalCertd(Path(tmp) / "d", **extra) as certd:
            if wait_ready:
                waited = _wait_ready(certd.address)
            pid = certd.process.pid
            with CertdClient(certd.address) as client:
                load = [_loadavg()]
                server0, client0 = _cpu_s(pid), time.process_time()
                for start in range(0, len(reqs) - BATCH + 1, BATCH):
                    chunk = reqs[start : start + BATCH]
                    t0 = time.perf_counter()
                    results = client.certify_batch(chunk)
                    rates.append(BATCH / (time.perf_counter() - t0))
                    refused = [r for r in results if isinstance(r, CertificationRefusedError)]
                    assert not refused, refused[:3]
                server_cpu, client_cpu = _cpu_s(pid) - server0, time.process_time() - client0
                load.append(_loadavg())
    n = BATCH * len(rates)
    print(
        json.dumps(
            {
                "rates": rates,
                "waited_s": waited,
                "server_cpu_s_per_1000": 1000 * server_cpu / n,
                "client_cpu_s_per_1000": 1000 * client_cpu / n,
                "loadavg": load,
            }
        )
    )


def run_child(script: str, path: Path, flags: list[str]) -> dict[str, object]:
    """``script --child FLAGS`` importing the tree laid out at ``path`` (``_layout``); the
    JSON of its last output line."""
    env = dict(os.environ, PYTHONPATH=str(path))
    out = subprocess.run(
        [sys.executable, script, "--child", *flags],
        env=env,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(path),
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def _measure(path: Path, flags: list[str]) -> dict[str, object]:
    return run_child(__file__, path, flags)


FLAGS = {
    "base": [],
    "head": [],
    "head-ready": ["--wait-ready"],
    "head-no-math": ["--no-math"],
    "base-no-math": ["--no-math"],
}
"""The child's flags for each variant; variants named base* run the base tree."""


def _rounds(base: str, head: str, variants: list[str], rounds: int) -> dict[str, list[Any]]:
    """Every variant's measurements (the child's JSON), ``rounds`` interleaved rounds."""
    runs: dict[str, list[Any]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {
            "base": _layout(_archive(base, Path(tmp) / "base"), Path(tmp) / "base-path"),
            "head": _layout(_archive(head, Path(tmp) / "head"), Path(tmp) / "head-path"),
        }
        for r in range(rounds):
            for v in variants:
                got = _measure(paths["base" if v.startswith("base") else "head"], FLAGS[v])
                runs[v].append(got)
                print(
                    f"round {r} {v}: {[round(x) for x in got['rates']]} server "
                    f"{got.get('server_cpu_s_per_1000', float('nan')):.3f} CPU-s/1000, "
                    f"load {got.get('loadavg')}",
                    file=sys.stderr,
                )
    return runs


def _summary(runs: dict[str, list[Any]]) -> dict[str, Any]:
    """Rates, CPU per 1,000 certificates and load of every variant, with ratios to the base."""
    rates = {v: [float(x) for got in gs for x in got["rates"]] for v, gs in runs.items()}
    nan = float("nan")
    cpu = {
        side: {
            v: [float(got.get(f"{side}_cpu_s_per_1000", nan)) for got in gs]
            for v, gs in runs.items()
        }
        for side in ("server", "client")
    }
    medians = {v: statistics.median(rs) for v, rs in rates.items()}
    cpu_medians = {v: statistics.median(c) for v, c in cpu["server"].items()}
    base_variant = "base-no-math" if "base-no-math" in runs else "base"
    base, base_cpu = medians.get(base_variant), cpu_medians.get(base_variant)
    return {
        "per_batch_rates": {v: sorted(round(x, 1) for x in rs) for v, rs in rates.items()},
        "ready_wait_s": {v: [round(float(g["waited_s"]), 1) for g in gs] for v, gs in runs.items()},
        "median_certificates_per_second": {v: round(m, 1) for v, m in medians.items()},
        "ratio_to_base": {v: round(m / base, 3) for v, m in medians.items()} if base else {},
        "ratio_to": base_variant,
        "server_cpu_s_per_1000": {v: [round(x, 3) for x in c] for v, c in cpu["server"].items()},
        "client_cpu_s_per_1000": {v: [round(x, 3) for x in c] for v, c in cpu["client"].items()},
        "median_server_cpu_s_per_1000": {v: round(m, 3) for v, m in cpu_medians.items()},
        "base_server_cpu_over_variant": (
            {v: round(base_cpu / m, 3) for v, m in cpu_medians.items()} if base_cpu else {}
        ),
        "loadavg_before_after": {
            v: [[round(x, 2) for x in g.get("loadavg", [])] for g in gs] for v, gs in runs.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="86c1122", help="the commit to compare against")
    parser.add_argument("--head", default="HEAD", help="the commit measured as head")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--variants",
        default="base,head,head-ready,head-no-math",
        help="comma-separated subset of base, base-no-math, head, head-ready, head-no-math",
    )
    parser.add_argument("--out", default="certify_regression", help="bench/results/OUT.json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--wait-ready", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-math", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.wait_ready, args.no_math)
        return
    runs = _rounds(args.base, args.head, args.variants.split(","), args.rounds)
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.head],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    write(
        args.out,
        {
            "base_commit": args.base,
            "head_commit": head,
            "batch": BATCH,
            "rounds": args.rounds,
            "shared_machine": True,
            **_summary(runs),
            "command": " ".join(["bench/compare_certify.py", *sys.argv[1:]]),
        },
    )


if __name__ == "__main__":
    main()
