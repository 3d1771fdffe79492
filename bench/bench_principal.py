"""What a loopback caller's principal costs the server as other sockets pile up.

Admission names every unauthenticated loopback call's principal by its socket's owner
(``certd.service.peers``). Read from the socket table (``/proc/net/tcp``) that is a pass over
every socket of the namespace, so a neighbour holding idle connections slowed every call; asked
of the kernel by four-tuple (``certd.service.sockdiag``, what ``certd serve`` does since it
knows its port) it is a hash lookup. Both are timed side by side here with 0, 1,000 and 4,000
extra idle loopback connections (two sockets each), CPU seconds per lookup (the load inflates
CPU time less than wall time).

Run: ``.venv/bin/python bench/bench_principal.py`` → ``bench/results/principal.json``.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import time
from collections.abc import Callable

from _common import median, write

from certd.service import peers


def _per_lookup_ms(lookup: Callable[[], str], n: int) -> float:
    peers._cache.clear()
    c0 = time.process_time()
    for _ in range(n):
        peers._cache.clear()  # the cost of a first call on a connection, not a cache hit
        lookup()
    return (time.process_time() - c0) / n * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=int, nargs="+", default=[0, 1000, 4000])
    ap.add_argument("--lookups", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, 2 * max(args.idle) + 64)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    server = socket.create_server(("127.0.0.1", 0), backlog=1024)
    port = server.getsockname()[1]
    me = socket.create_connection(("127.0.0.1", port))
    held: list[socket.socket] = [server.accept()[0]]
    peer = f"ipv4:127.0.0.1:{me.getsockname()[1]}"
    rows = []
    for idle in sorted(args.idle):
        while len(held) < 1 + 2 * idle:
            held.append(socket.create_connection(("127.0.0.1", port)))
            held.append(server.accept()[0])
        by_table = lambda: peers.principal_of_peer(peer)  # noqa: E731
        by_tuple = lambda: peers.principal_of_peer(peer, server_port=port)  # noqa: E731
        table, four = [], []
        for _ in range(args.repeats):
            table.append(_per_lookup_ms(by_table, args.lookups))
            four.append(_per_lookup_ms(by_tuple, args.lookups))
        row = {
            "idle_connections": idle,
            "socket_table_ms": round(median(table), 4),
            "four_tuple_ms": round(median(four), 4),
        }
        row["ratio"] = round(row["socket_table_ms"] / row["four_tuple_ms"], 1)
        rows.append(row)
        print(row, flush=True)
    result = {
        "load_average_at_start": round(os.getloadavg()[0], 2),
        "cpu_ms_per_lookup_median_of_repeats": rows,
        "lookups_per_repeat": args.lookups,
        "repeats": args.repeats,
    }
    print(write("principal", result))


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"{time.perf_counter() - t0:.1f} s")
