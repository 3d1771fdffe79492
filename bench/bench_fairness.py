"""Fairness and cancellation: an honest single Verify beside a batch that would hold the pools.

Run: ``.venv/bin/python bench/bench_fairness.py [--repeats N] [--backends bwrap,docker]``
→ ``bench/results/fairness.json``.

In one run, on the same machine, against a real ``certd serve`` process on 127.0.0.1 (2
sandboxed workers, the default per-check limits: 10 s wall, 5 s CPU; math: 2 workers, 2 s
deadline):

* **alone**: an honest single code ``Verify`` (Python stdin/stdout, one case), ``repeats`` times.
* **beside a sleeping batch**: the same Verify, ``repeats`` times, while another client's
  ``VerifyBatch`` of 40 ``time.sleep(100)`` programs runs. The peer is the issue's bound:
  beside ≤ 2 × alone + the per-check wall limit. The FIFO queue this replaces put the single
  Verify behind the whole batch: 40 × 10 s / 2 workers = 200 s.
* **after a cancelled batch**: the batch is cancelled 3 s after it starts; then the Verify.
* **math**: an honest math Verify alone and beside a batch of 30 ``\\binom{10^6}{500000}``
  answers (each runs to the 2 s deadline; holding the pool took 30 × 2 s / 2 = 30 s and more).

Each figure is a median (and max) of wall seconds measured by the client. The machine is
shared with other work, so absolute numbers move between runs; the ratios are what to read.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write

from certd.config import CodeConfig, MathConfig
from certd.v1 import tasks_pb2, verifier_pb2, verifier_pb2_grpc
from forkgate.local import LocalCertd

BATCH_START_S = 2.0  # the batch's first two checks hold both workers by then

IO = tasks_pb2.Task(
    code=tasks_pb2.CodeTask(
        language="python", cases=[tasks_pb2.CodeCase(stdin="2 3\n", stdout="5\n")]
    )
)
HONEST = verifier_pb2.VerifyRequest(
    id="honest", task=IO, response="```python\na, b = map(int, input().split())\nprint(a + b)\n```"
)
SLEEPER = "```python\nimport time\ntime.sleep(100)\n```"
MATH = tasks_pb2.Task(math=tasks_pb2.MathTask(gold="3"))
MATH_HONEST = verifier_pb2.VerifyRequest(id="m", task=MATH, response=r"\boxed{3}")
BINOM = r"\boxed{\binom{10^6}{500000}}"


def _batch(task: tasks_pb2.Task, response: str, n: int) -> verifier_pb2.VerifyBatchRequest:
    items = [verifier_pb2.VerifyRequest(id=f"b{i}", task=task, response=response) for i in range(n)]
    return verifier_pb2.VerifyBatchRequest(items=items)


def _timed(stub: verifier_pb2_grpc.VerifierStub, req: verifier_pb2.VerifyRequest) -> float:
    t0 = time.perf_counter()
    reply = stub.Verify(req, timeout=300)
    took = time.perf_counter() - t0
    if reply.verdict.status != tasks_pb2.CORRECT:
        raise SystemExit(f"honest check not CORRECT: {reply.verdict.detail}")
    return took


def _summary(xs: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(xs), 3), "max_s": round(max(xs), 3)}


def _serve(tmp: str, config: dict[str, Any]) -> LocalCertd:
    path = Path(tmp) / "config.json"
    path.write_text(json.dumps(config))
    return LocalCertd(Path(tmp) / "d", config=path)


def code_backend(backend: str, repeats: int) -> dict[str, Any]:
    """The three code scenarios on one backend."""
    cfg = CodeConfig(backend=backend, pool_size=2)
    config = {"code": {"backend": backend, "pool_size": 2}, "math": {"enabled": False}}
    with tempfile.TemporaryDirectory() as tmp, _serve(tmp, config) as certd:
        with grpc.insecure_channel(certd.address) as ch:
            stub = verifier_pb2_grpc.VerifierStub(ch)
            _timed(stub, HONEST)  # starts the pool
            alone = [_timed(stub, HONEST) for _ in range(repeats)]
            batch = stub.VerifyBatch.future(_batch(IO, SLEEPER, 40), timeout=900)
            time.sleep(BATCH_START_S)
            beside = [_timed(stub, HONEST) for _ in range(repeats)]
            still_running = not batch.done()
            batch.cancel()
            after = []
            for _ in range(repeats):
                batch = stub.VerifyBatch.future(_batch(IO, SLEEPER, 40), timeout=900)
                time.sleep(3.0)
                batch.cancel()
                after.append(_timed(stub, HONEST))
    bound = 2 * statistics.median(alone) + cfg.wall_time_s
    return {
        "backend": backend,
        "wall_limit_s": cfg.wall_time_s,
        "alone": _summary(alone),
        "beside_sleeping_batch": _summary(beside),
        "batch_still_running_while_measured": still_running,
        "after_cancelled_batch": _summary(after),
        "bound_s": round(bound, 3),
        "beside_max_within_bound": max(beside) <= bound,
        "beside_over_alone_median": round(statistics.median(beside) / statistics.median(alone), 2),
        "fifo_expected_s": 40 * cfg.wall_time_s / cfg.pool_size,
    }


def math_scenario(repeats: int) -> dict[str, Any]:
    """An honest math Verify alone and beside a batch of 30 binomials."""
    math = MathConfig(workers=2, deadline_s=2.0, first_step=False)
    config = {"math": {"workers": 2, "deadline_s": 2.0, "first_step": False}}
    with tempfile.TemporaryDirectory() as tmp, _serve(tmp, config) as certd:
        with grpc.insecure_channel(certd.address) as ch:
            stub = verifier_pb2_grpc.VerifierStub(ch)
            _timed(stub, MATH_HONEST)  # starts the pool
            alone = [_timed(stub, MATH_HONEST) for _ in range(repeats)]
            batch = stub.VerifyBatch.future(_batch(MATH, BINOM, 30), timeout=900)
            time.sleep(0.5)
            beside = [_timed(stub, MATH_HONEST) for _ in range(repeats)]
            still_running = not batch.done()
            batch.cancel()
    return {
        "deadline_s": math.deadline_s,
        "alone": _summary(alone),
        "beside_binomial_batch": _summary(beside),
        "beside_each_s": [round(x, 3) for x in beside],
        "batch_still_running_while_measured": still_running,
        "bound_s": round(2 * statistics.median(alone) + math.deadline_s, 3),
        "held_pool_expected_s": 30 * math.deadline_s / math.workers,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--backends", default="bwrap,docker")
    args = ap.parse_args()
    code = [code_backend(b, args.repeats) for b in args.backends.split(",") if b]
    math = math_scenario(args.repeats)
    targets: dict[str, Any] = {
        "bound": "honest Verify beside the batch <= 2 x alone (median) + per-check limit",
        **{
            f"code_{c['backend']}_beside_max_within_bound": c["beside_max_within_bound"]
            for c in code
        },
        "math_beside_median_within_bound": math["beside_binomial_batch"]["median_s"]
        <= math["bound_s"],
        "math_beside_max_within_bound": math["beside_binomial_batch"]["max_s"] <= math["bound_s"],
    }
    write(
        "fairness",
        {
            "repeats": args.repeats,
            "note": "shared machine (other engineers' jobs ran meanwhile)",
            "code": code,
            "math": math,
            "targets": targets,
        },
    )


if __name__ == "__main__":
    main()
