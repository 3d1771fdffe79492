"""The user's path end to end: ``forkgate verify-batch`` (JSONL in, JSONL out, one CLI process)
vs reasoning-gym's in-process ``score_answer`` on the same Countdown answers, in one run.

Input: ``bench_verify``'s 2,000 model-like answers (correct witnesses and wrong well-formed
expressions over 250 puzzles) repeated ``COPIES`` times with distinct ids, as task-object lines
``{"id", "domain", "task", "response"}``. Ours: the wall time of the whole ``forkgate
verify-batch`` process (interpreter start, imports, reading, verifying through a ``certd serve``
process on loopback with receipts signed and logged, writing; the server serves Countdown only, see
``SERVER_CONFIG``), with and without ``--trust`` (receipt checking). Peer: reasoning-gym's
``score_answer`` called in this process (its import and dataset creation not counted). Also
reported: the CLI's start-up alone (``--version``), and CPU seconds of each side (ours: the CLI
process plus the certd server and its workers), which a shared machine's load distorts less than
wall time: on a contended machine a side that runs in several processes gets more CPU shares than a
one-process side.

Rounds are interleaved (reasoning-gym, CLI, CLI with ``--trust``, start-up), so a shared
machine's load hits both sides alike.

Run: ``.venv/bin/python bench/bench_verify_batch.py`` → ``bench/results/verify_batch.json``.
With ``--default-config`` the server runs certd's default config (math on, its pool warming in
the background: what a user starts) → ``bench/results/verify_batch_default.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import median, timed_runs, write
from bench_verify import answers

from forkgate.local import LocalCertd

COPIES = 10  # 20,000 lines: start-up (~0.3 s idle) is part of what a user waits for
REPEATS = 3
SERVER_CONFIG = {"math": {"enabled": False}}
"""Countdown only, as ``bench_certify``: the math pool's start-up and idle-time grammar priming
(tens of CPU seconds after each start) would load the machine during the rounds and count in
the server's CPU seconds, though no math is checked here."""


def _cli(*argv: str) -> float:
    """Run the CLI; return its CPU seconds (user + system, from ``wait4``)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "forkgate.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"forkgate {argv[0]} failed ({code}): {err}")
    return float(usage.ru_utime + usage.ru_stime)


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds so far of a process and its children (the server and its workers)."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def _write_input(pairs: list[tuple[dict[str, object], str]], src: Path) -> None:
    """The JSONL that ``forkgate verify-batch`` reads: one line per answer."""
    with src.open("w") as f:
        for i, (p, a) in enumerate(pairs):
            task = {"numbers": p["numbers"], "target": p["target"]}
            line = {
                "id": i,
                "domain": "countdown",
                "task": task,
                "response": f"<answer>{a}</answer>",
            }
            f.write(json.dumps(line) + "\n")


def _statuses(dst: Path) -> dict[str, int]:
    """How many output lines carry each status."""
    statuses: dict[str, int] = {}
    for line in dst.read_text().splitlines():
        s = json.loads(line)["status"]
        statuses[s] = statuses.get(s, 0) + 1
    return statuses


def _rounds(
    run_rg: Callable[[], None], certd: LocalCertd, base: list[str]
) -> dict[str, list[float]]:
    """Interleaved, one of each per round, so that a shared machine's load changes hit both
    sides alike; the per-round ratios are reported beside the medians."""
    t: dict[str, list[float]] = {k: [] for k in ("rg", "cli", "cli_trust", "startup")}
    t["rg_cpu"], t["cli_cpu"] = [], []  # CPU seconds: load-independent beside the wall times
    for _ in range(REPEATS):
        c0 = time.process_time()
        t["rg"] += timed_runs(run_rg, 1)
        t["rg_cpu"].append(time.process_time() - c0)
        server0 = _tree_cpu_s(certd.process.pid)
        t0 = time.perf_counter()
        own = _cli(*base)
        t["cli"].append(time.perf_counter() - t0)
        t["cli_cpu"].append(own + _tree_cpu_s(certd.process.pid) - server0)
        t["cli_trust"] += timed_runs(lambda: _cli(*base, "--trust", certd.vkey), 1)
        t["startup"] += timed_runs(lambda: _cli("--version"), 1)
    return t


def main(*, default_config: bool = False) -> None:
    """Run the comparison; ``default_config``: certd's default config instead of Countdown only."""
    import reasoning_gym

    load = round(os.getloadavg()[0], 2)

    pairs = answers() * COPIES
    rg = reasoning_gym.create_dataset("countdown", size=1, seed=0)
    rg_entries = [{"metadata": {"numbers": p["numbers"], "target": p["target"]}} for p, _ in pairs]

    def run_rg() -> None:
        for (_, a), entry in zip(pairs, rg_entries, strict=True):
            rg.score_answer(a, entry)

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        _write_input(pairs, src)
        config: Path | None = Path(tmp) / "config.json"
        if default_config:
            config = None  # certd's embedded default: math on
        else:
            Path(tmp, "config.json").write_text(json.dumps(SERVER_CONFIG))
        with LocalCertd(Path(tmp) / "d", config=config) as certd:
            base = ["verify-batch", "--server", certd.address, "--in", str(src), "--out", str(dst)]
            _cli(*base)  # warm-up (the server's pools, the page cache)
            t = _rounds(run_rg, certd, base)
            statuses = _statuses(dst)
    _report(len(pairs), t, default_config, load, statuses)


def _report(
    n: int, t: dict[str, list[float]], default_config: bool, load: float, statuses: dict[str, int]
) -> None:
    """Write ``bench/results/verify_batch[_default].json``."""
    rg_s, cli_s, cli_trust_s, startup_s = t["rg"], t["cli"], t["cli_trust"], t["startup"]
    rg_cpu, cli_cpu = t["rg_cpu"], t["cli_cpu"]
    rg_rate = n / median(rg_s)
    ratio = median(rg_s) / median(cli_s)
    ratio_trust = median(rg_s) / median(cli_trust_s)
    write(
        "verify_batch_default" if default_config else "verify_batch",
        {
            "lines": n,
            "repeats": REPEATS,
            "server_config": "certd default (math on)" if default_config else SERVER_CONFIG,
            "load_average_at_start": load,
            "statuses": statuses,
            "median_seconds": {
                "reasoning_gym_in_process": median(rg_s),
                "forkgate_verify_batch_cli": median(cli_s),
                "forkgate_verify_batch_cli_trust": median(cli_trust_s),
                "forkgate_cli_startup_only": median(startup_s),
            },
            "all_seconds": {
                "reasoning_gym_in_process": rg_s,
                "forkgate_verify_batch_cli": cli_s,
                "forkgate_verify_batch_cli_trust": cli_trust_s,
                "forkgate_cli_startup_only": startup_s,
            },
            "cpu_seconds": {
                "reasoning_gym_in_process": rg_cpu,
                "forkgate_cli_plus_certd_server": cli_cpu,
                "ratio_of_medians": round(median(rg_cpu) / median(cli_cpu), 2),
            },
            "per_round_ratio": [round(r / c, 2) for r, c in zip(rg_s, cli_s, strict=True)],
            "answers_per_second": {
                "reasoning_gym_in_process": round(rg_rate, 1),
                "forkgate_verify_batch_cli": round(n / median(cli_s), 1),
                "forkgate_verify_batch_cli_trust": round(n / median(cli_trust_s), 1),
            },
            "target": {
                "cli_over_reasoning_gym_at_least": 5.0,
                "measured_ratio": round(ratio, 2),
                "measured_ratio_with_trust": round(ratio_trust, 2),
                "met": ratio >= 5.0,
            },
        },
    )


if __name__ == "__main__":
    main(default_config="--default-config" in sys.argv[1:])
