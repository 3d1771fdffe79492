"""Round trip of a tiny frame to a container's pid 1: the attached stream vs a direct unix socket.

Run: ``FORKGATE_SANDBOX_IMAGE=forkgate/sandbox-runner:1 .venv/bin/python
bench/bench_docker_channel.py [--n 2000] [--rounds 5] [--out NAME]`` →
``bench/results/NAME.json`` (default ``docker_channel``).

Two containers of the runner image each run an echo loop as pid 1 (read 16 bytes from fd 0,
write them to fd 1): one reached through ``attach_socket`` (certd → dockerd → containerd-shim
→ fifo, and back multiplexed), one whose fds 0/1 are a unix socket bind-mounted read-only
(the Docker backend's direct channel). Rounds alternate A and B; per round the median
round-trip time and the engine's CPU (dockerd, containerd, shims) per round trip.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import docker

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_code_check import _engine_pids, _stat

from sandboxes._docker_channel import CONTAINER_DIR, CONTAINER_SOCKET, DirectChannel

ECHO = """
import os, socket, sys
if len(sys.argv) > 1:
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    os.dup2(s.fileno(), 0); os.dup2(s.fileno(), 1)
while True:
    b = os.read(0, 16)
    if not b:
        break
    os.write(1, b)
"""
_HEADER = 8  # the attached stream's frame header


def _start(client: Any, image: str, direct: bool) -> tuple[Any, socket.socket, Any]:
    channel = DirectChannel.open() if direct else None
    cmd = ["/usr/bin/python3", "-I", "-S", "-c", ECHO]
    kw: dict[str, Any] = {"network_mode": "none", "user": "1000:1000", "stdin_open": True}
    if channel is not None:
        cmd.append(CONTAINER_SOCKET)
        kw["volumes"] = {str(channel.host_dir): {"bind": CONTAINER_DIR, "mode": "ro"}}
    container = client.containers.create(image, cmd, **kw)
    wrapper = container.attach_socket(params={"stdin": 1, "stdout": 1, "stream": 1})
    container.start()
    if channel is None:
        return container, wrapper._sock, wrapper
    container.reload()
    conn = channel.accept(container.attrs["State"]["Pid"], time.monotonic() + 30, lambda: True)
    channel.close()
    return container, conn, wrapper


def _round(sock: socket.socket, attached: bool, n: int) -> dict[str, float]:
    want = 16 + (_HEADER if attached else 0)
    times = []
    engine0 = sum(_stat(p)[0] for p in _engine_pids())
    for _ in range(n):
        t = time.perf_counter()
        sock.sendall(b"x" * 16)
        got = 0
        while got < want:
            got += len(sock.recv(want - got))
        times.append(time.perf_counter() - t)
    engine = sum(_stat(p)[0] for p in _engine_pids()) - engine0
    return {
        "rtt_us_median": round(statistics.median(times) * 1e6, 1),
        "engine_cpu_us_per_rtt": round(engine / n * 1e6, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="docker_channel")
    args = ap.parse_args()
    image = os.environ.get("FORKGATE_SANDBOX_IMAGE", "forkgate/sandbox-runner:1")
    client = docker.from_env()
    sides = {"attached": _start(client, image, False), "direct": _start(client, image, True)}
    rounds: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
    try:
        for r in range(args.rounds):
            for name in sorted(sides, reverse=bool(r % 2)):
                _, sock, _ = sides[name]
                rounds[name].append(_round(sock, name == "attached", args.n))
    finally:
        for container, _, _ in sides.values():
            container.remove(force=True)
    result: dict[str, Any] = {"n": args.n, "rounds": rounds}
    for name, rs in rounds.items():
        result[name] = {k: round(statistics.median(x[k] for x in rs), 1) for k in rs[0]}
    out = Path(__file__).resolve().parent / "results" / f"{args.out}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in sides}, indent=1))


if __name__ == "__main__":
    main()
