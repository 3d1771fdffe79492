"""Cold start: time from ``certd serve`` to the first math verdict, vs Math-Verify's first verdict.

- **Ours**: a fresh ``certd serve`` process (default config: the math pool and the first-step
  embedding model warm up in the background). The client asks at once: one ``Verify`` with no
  retries (it waits ``math.ready_wait_s`` on the server and then gets UNAVAILABLE naming the
  warm-up stage, or its verdict), then ``Verify`` with the client's default retries until a
  verdict comes. Recorded: the serving line (port bound), health ``certd.v1.Verifier/math``
  turning SERVING (polled every 0.1 s), the first verdict, the first answer's status and
  message, and the server's ``math warm-up:`` log lines.
- **Peer**: a fresh Python process that imports Math-Verify and verifies one answer (its cold
  start: imports and grammar tables), timed from spawn to its output.

``ROUNDS`` rounds, one after the other; medians are reported. Times depend on the load of the
(shared) machine, recorded as the load average before each round.

Run: ``.venv/bin/python bench/bench_math_startup.py`` → ``bench/results/math_startup.json``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from _common import write
from grpc_health.v1 import health_pb2, health_pb2_grpc

from forkgate import CertdClient, ClientSettings
from forkgate.errors import ForkgateError
from forkgate.local import LocalCertd

ROUNDS = 3
MATH_HEALTH = "certd.v1.Verifier/math"
TASK = {"domain": "math", "gold": r"\frac{1}{2}"}
RESPONSE = r"So the answer is \boxed{0.5}."
PEER = (
    "from math_verify import parse, verify\n"
    "print(verify(parse('$\\\\frac{1}{2}$'), parse('$\\\\boxed{0.5}$')))\n"
)


def _watch_health(address: str, t0: float, out: dict[str, float], stop: threading.Event) -> None:
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while not stop.is_set():
            try:
                got = stub.Check(health_pb2.HealthCheckRequest(service=MATH_HEALTH), timeout=5)
                if got.status == health_pb2.HealthCheckResponse.SERVING:
                    out["health_serving_s"] = round(time.perf_counter() - t0, 3)
                    return
                out.setdefault("health_not_serving_seen_s", round(time.perf_counter() - t0, 3))
            except grpc.RpcError:
                pass
            time.sleep(0.1)


def certd_round() -> dict[str, Any]:
    out: dict[str, Any] = {"load_average_before": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "certd.log"
        with log.open("w") as err:
            t0 = time.perf_counter()
            certd = LocalCertd(Path(tmp) / "d", stderr=err.fileno())
            out["serving_line_s"] = round(time.perf_counter() - t0, 3)
            stop = threading.Event()
            watch = threading.Thread(
                target=_watch_health, args=(certd.address, t0, out, stop), daemon=True
            )
            watch.start()
            try:
                once = ClientSettings(max_retries=0)
                with CertdClient(certd.address, trusted_keys=[certd.vkey], settings=once) as c:
                    try:
                        v = c.verify(TASK, RESPONSE)
                        out["first_call"] = f"verdict {v.status}"
                    except ForkgateError as e:
                        out["first_call"] = f"{type(e).__name__}: {e}"
                    out["first_call_answered_s"] = round(time.perf_counter() - t0, 3)
                with CertdClient(certd.address, trusted_keys=[certd.vkey]) as c:
                    v = c.verify(TASK, RESPONSE)
                out["first_verdict_s"] = round(time.perf_counter() - t0, 3)
                out["first_verdict_status"] = v.status
                watch.join(timeout=30)
            finally:
                stop.set()
                certd.stop()
        out["warm_up_log"] = [
            line.split(" ", 2)[-1].strip()
            for line in log.read_text().splitlines()
            if "math warm-up:" in line or "math domain ready" in line
        ]
    return out


def peer_round() -> dict[str, Any]:
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PEER], capture_output=True, text=True, check=True, timeout=600
    )
    return {
        "first_verdict_s": round(time.perf_counter() - t0, 3),
        "answer": done.stdout.strip(),
    }


def main() -> None:
    rounds = [{"certd": certd_round(), "math_verify": peer_round()} for _ in range(ROUNDS)]
    ours = [r["certd"]["first_verdict_s"] for r in rounds]
    ready = [r["certd"].get("health_serving_s") for r in rounds]
    peer = [r["math_verify"]["first_verdict_s"] for r in rounds]
    write(
        "math_startup",
        {
            "rounds": ROUNDS,
            "per_round": rounds,
            "median_first_math_verdict_s": {
                "certd": statistics.median(ours),
                "math_verify_cold_process": statistics.median(peer),
            },
            "median_health_serving_s": statistics.median([x for x in ready if x is not None]),
            "note": "shared 2-core machine: other engineers' jobs ran at the same time",
        },
    )


if __name__ == "__main__":
    main()
