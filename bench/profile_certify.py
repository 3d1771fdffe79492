"""Where a CertifyBatch's CPU goes, stage by stage, in CPU-seconds per 1,000 certificates.

The servicer's own ``CertifyBatch`` runs in this process (no gRPC transport) over a SQLite
ledger with ``synchronous=FULL``, on the requests ``bench_certify.py`` sends, in batches of
1,000: the request bytes are parsed, every item validated, every witness verified and its label
recomputed, every certificate signed, group-committed and returned with a fresh inclusion
proof, and the reply serialized. Each stage is timed by the CPU clock of the thread running
it (``time.thread_time``), so other work on the machine does not inflate it; the committer
thread's CPU (appends, hashing, checkpoints) is read from its own thread clock.

Each round runs in a fresh process; with ``--base COMMIT`` the same rounds run for that commit
too (``git archive``'d, as ``compare_certify.py`` does), interleaved round by round.

Run: ``.venv/bin/python bench/profile_certify.py --base f93f6b0`` →
``bench/results/certify_path.json``.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import certify_requests, write
from compare_certify import ROOT, _archive, _cpu_s, _layout

import certd.service.authority as service
from certd.authority.checker import Checkers
from certd.authority.countdown_checker import CountdownChecker
from certd.authority.verifypool import VerifyPool
from certd.config import CertdConfig, CountdownConfig, MathConfig
from certd.ledger.certificates import CertificateLog
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.signing.keys import SigningKey
from certd.v1 import authority_pb2

try:  # the certification rules' module; a --base before the rename calls it policy
    import certd.authority.feasibility as policy
except ImportError:
    import certd.authority.policy as policy  # type: ignore[import-not-found,no-redef]
from forkgate._base import certify_request

BATCH = 1000
KEY = "forkgate.bench/certify-path"
CPU: defaultdict[str, float] = defaultdict(float)


def timed(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, adding the calling thread's CPU time spent in it to ``CPU[stage]``."""

    @functools.wraps(fn)
    def run(*args: Any, **kw: Any) -> Any:
        t0 = time.thread_time()
        try:
            return fn(*args, **kw)
        finally:
            CPU[stage] += time.thread_time() - t0

    return run


def instrument() -> None:
    """Wrap the certify path's stages (inclusive timers: sign is inside draft, and so on)."""
    service.AuthorityServicer._request = timed(
        "decode+validate", service.AuthorityServicer._request
    )  # type: ignore[method-assign]
    CountdownChecker.verify = timed("verify witness+label", CountdownChecker.verify)  # type: ignore[method-assign]
    policy.Authority._draft = timed("statement+sign (draft)", policy.Authority._draft)  # type: ignore[method-assign]
    policy.sign_envelope = timed("sign (Ed25519 + envelope)", policy.sign_envelope)
    batched = hasattr(CertificateLog, "record_many")  # a tree before it records one at a time
    name = "record_many" if batched else "record"
    setattr(CertificateLog, name, timed("ledger record (serving)", getattr(CertificateLog, name)))
    policy.Authority._wait = staticmethod(timed("ledger wait (serving)", policy.Authority._wait))  # type: ignore[method-assign]
    if hasattr(policy, "proven"):  # the authority proves what it returns (after 140dcb2)
        policy.proven = timed("ledger prove (serving)", policy.proven)
    service.certificate_to_pb = timed("response: certificate+proof", service.certificate_to_pb)


class _Context:
    """The little of ``grpc.ServicerContext`` the servicer uses."""

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return True

    def peer(self) -> str:  # the quota counts per client (certd.service.access.client_of)
        return "ipv4:127.0.0.1:1"


def run(batches: int, rounds: int, workers: int = 0) -> dict[str, Any]:
    cfg = CertdConfig(
        countdown=CountdownConfig(verify_workers=0), math=MathConfig(enabled=False)
    )  # Countdown only, as bench_certify.py serves
    reqs = certify_requests(2500, seed=21)[: BATCH * batches]
    raws = [
        authority_pb2.CertifyBatchRequest(
            items=[certify_request(t, label, w) for t, label, w in reqs[s : s + BATCH]]
        ).SerializeToString()
        for s in range(0, len(reqs), BATCH)
    ]
    per_round = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            key = SigningKey.generate(KEY)
            ledger = Ledger(SQLiteStore(Path(tmp) / "ledger.db", synchronous="FULL"), key, KEY)
            (committer,) = [t for t in threading.enumerate() if t.name == "ledger-committer"]
            checkers = Checkers(cfg)
            authority = policy.Authority(checkers, ledger, key)
            pool = None
            if workers and hasattr(authority, "count_in"):  # signed counts in the pool's workers
                pool = VerifyPool(checkers.for_domain("countdown"), workers=workers, min_batch=256)
                authority.count_in(pool)
            args: tuple[Any, ...] = (cfg, checkers, authority, ledger, None)
            params = inspect.signature(service.AuthorityServicer).parameters
            if "ledger" not in params:
                args = (cfg, checkers, authority, None)  # a servicer that reads no ledger
            if "checkers" not in params:
                args = (cfg, authority, None)  # one authority call per RPC (issue 34)
            servicer = service.AuthorityServicer(*args)
            clock = time.pthread_getcpuclockid(committer.ident or 0)
            CPU.clear()
            c0, p0, t0 = time.clock_gettime(clock), time.process_time(), time.perf_counter()
            tree0 = _cpu_s(os.getpid())
            for raw in raws:
                t = time.thread_time()
                request = authority_pb2.CertifyBatchRequest.FromString(raw)
                CPU["parse request bytes"] += time.thread_time() - t
                t = time.thread_time()
                reply = servicer.CertifyBatch(request, _Context())  # type: ignore[arg-type]
                CPU["servicer total"] += time.thread_time() - t
                t = time.thread_time()
                reply.SerializeToString()
                CPU["serialize reply"] += time.thread_time() - t
                assert all(r.HasField("certificate") for r in reply.results)
            CPU["committer thread"] = time.clock_gettime(clock) - c0
            CPU["process total"] = time.process_time() - p0
            wall = time.perf_counter() - t0
            if pool is not None:  # the workers' CPU (the forkserver's children)
                CPU["pool workers"] = _cpu_s(os.getpid()) - tree0 - CPU["process total"]
                pool.close()
            ledger.close()
            n = len(reqs)
            per_round.append(
                {
                    "cpu_s_per_1000": {k: round(v / n * 1000, 4) for k, v in CPU.items()},
                    "wall_s_per_1000": round(wall / n * 1000, 4),
                }
            )
    return {"rounds": per_round}


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def _child(batches: int, workers: int) -> None:
    """One round in this process's tree; print its figures as one JSON line."""
    instrument()
    print(json.dumps(run(batches, 1, workers)["rounds"][0]))


def _round(tree: Path | None, batches: int, workers: int) -> dict[str, Any]:
    """One round in a fresh process, in ``tree``'s packages (None: this checkout)."""
    env = dict(os.environ, PYTHONPATH=str(tree)) if tree is not None else None
    flags = ["--batches", str(batches), "--pool", str(workers)]
    out = subprocess.run(
        [sys.executable, __file__, "--child", *flags],
        env=env,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(tree or ROOT),
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", help="also profile this commit, rounds interleaved")
    parser.add_argument("--out", default="certify_path")
    parser.add_argument(
        "--pool", type=int, default=0, help="verify-pool workers counting signed counts (head)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.batches, args.pool)
        return
    with tempfile.TemporaryDirectory() as tmp:
        trees: dict[str, Path | None] = {"head": None}
        if args.base:
            base = _archive(args.base, Path(tmp) / "base")
            trees = {"base": _layout(base, Path(tmp) / "base-path"), **trees}
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        loads = []
        for _ in range(args.rounds):
            for name, tree in trees.items():
                rounds[name].append(_round(tree, args.batches, args.pool))
                with open("/proc/loadavg") as f:
                    loads.append(float(f.read().split()[0]))
    medians = {
        name: {
            stage: round(_median([r["cpu_s_per_1000"].get(stage, 0.0) for r in rs]), 4)
            for stage in rs[0]["cpu_s_per_1000"]
        }
        for name, rs in rounds.items()
    }
    write(
        args.out,
        {
            "base_commit": args.base,
            "head": "the working tree",
            "certificates_per_round": BATCH * args.batches,
            "rounds": rounds,
            "median_cpu_s_per_1000": medians,
            "loadavg_after_each_round": loads,
            "command": " ".join(["bench/profile_certify.py", *sys.argv[1:]]),
        },
    )


if __name__ == "__main__":
    main()
