"""Math verification: certd over gRPC vs Math-Verify 0.9.0 on a 2-process pool, one run.

Cases: Math-Verify 0.9.0's public test cases (gold, prediction, expected), read from its sdist
(``tests/conformance/mathverify_cases.py``; ``make math-verify-cases`` fetches it).

- **Peer**: ``math_verify.parse`` + ``math_verify.verify`` exactly as its tests call them
  (``LatexExtractionConfig(boxed_match_priority=0)``, ``ExprExtractionConfig()``, the case's
  precision), on a ``ProcessPoolExecutor`` of 2 processes, chunks of 8 cases.
- **Ours**: a separate ``certd serve`` process with its default config (math pool of 2
  workers, 2 s deadline, 1 GiB memory cap, first-step κ with the embedding model), one
  ``VerifyBatch`` per pass, receipts signed and logged.

Both sides are warmed up on other inputs first (process start, imports, model load, parser
tables); certd is then left idle for ``SETTLE_S`` seconds, in which its workers prime the
LaTeX grammar's prediction cache from a generated corpus (``math.prime_grammar``, on by
default; the corpus shares no answer with the cases), as a server that has been up for a
minute has. Pass 1 then sees every case for the first time (no answer was parsed before: the
headline figure); passes 2–4 repeat the cases, as RL does when a prompt's rollouts recur
(certd's per-worker parse cache helps there; Math-Verify keeps a 20-entry cache).
Deadline overrun: each bomb from the issue, and each case, sent alone through unary
``Verify``; overrun = client-side latency − 2 s deadline.

Run: ``.venv/bin/python bench/bench_math.py`` → ``bench/results/math.json``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from _common import write

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "conformance"))

from mathverify_cases import Case, load_cases  # noqa: E402

from forkgate import CertdClient, VerifyItem  # noqa: E402
from forkgate.local import LocalCertd  # noqa: E402

PASSES = 4
SETTLE_S = 30.0  # idle time after certd's warm-up batch: workers prime the grammar
DEADLINE_S = 2.0  # certd's default math.deadline_s
BOMBS = {
    "power tower": r"\boxed{5^{5^{5^{5^5}}}}",
    "power tower, plain": "the answer is 5^(5^(5^(5^5)))",
    "1 MB of LaTeX": "$" + r"\frac{1}{2}+" * 90_000 + "1$",
    "1 MB boxed": r"\boxed{" + "1+" * 500_000 + "1}",
    "10,000 nested braces": "\\boxed" + "{" * 10_000 + "1" + "}" * 10_000,
    "nested fractions": "\\boxed{" + "\\frac{1}{" * 30 + "2" + "}" * 30 + "}",
    "many fractions": "\\boxed{" + "+".join(["\\frac{1}{2}"] * 40) + "}",
    "huge factorial": r"\boxed{100000!}",
}


def _mv_chunk(chunk: list[tuple[str, str, int]]) -> list[bool]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    out = []
    for gold, pred, precision in chunk:
        targets = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
        out.append(
            bool(verify(parse(gold, targets), parse(pred, targets), float_rounding=precision))
        )
    return out


def _warm_inputs() -> list[tuple[str, str, int]]:
    """Inputs that are not among the cases: imports, process start and parser tables."""
    out = []
    for i in range(1, 41):
        out.append((f"\\frac{{{i}}}{{{i + 1}}}", f"The answer is $\\boxed{{{i}/{i + 1}}}$.", 6))
        out.append((f"x = {i}", f"We solve: $2x = {2 * i}$, so $x = {i}$.", 6))
        out.append((f"({i}, {i + 2}]", f"Thus \\boxed{{({i}, {i + 2}]}}", 6))
    return out


def run_math_verify(cases: list[Case]) -> dict[str, Any]:
    rows = [(c.gold, c.pred, c.precision) for c in cases]
    chunks = [rows[i : i + 8] for i in range(0, len(rows), 8)]
    warm = _warm_inputs()
    with ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(_mv_chunk, [warm[i : i + 8] for i in range(0, len(warm), 8)]))
        seconds = []
        got: list[bool] = []
        for _ in range(PASSES):
            t0 = time.perf_counter()
            got = [x for part in pool.map(_mv_chunk, chunks) for x in part]
            seconds.append(time.perf_counter() - t0)
    agree = sum(g == c.expected for g, c in zip(got, cases, strict=True))
    return {"seconds_per_pass": seconds, "agreement": agree / len(cases)}


def run_certd(cases: list[Case]) -> dict[str, Any]:
    items = [
        VerifyItem(
            {"domain": "math", "gold": c.gold, "precision_digits": max(1, c.precision)},
            c.pred,
            str(i),
        )
        for i, c in enumerate(cases)
    ]
    warm = [
        VerifyItem({"domain": "math", "gold": g, "precision_digits": p}, r, f"w{i}")
        for i, (g, r, p) in enumerate(_warm_inputs())
    ]
    with tempfile.TemporaryDirectory() as tmp, LocalCertd(Path(tmp) / "d") as certd:
        with CertdClient(certd.address, trusted_keys=[certd.vkey]) as client:
            client.verify_batch(warm)
            time.sleep(SETTLE_S)
            seconds = []
            verdicts: list[Any] = []
            for _ in range(PASSES):
                t0 = time.perf_counter()
                verdicts = client.verify_batch(items)
                seconds.append(time.perf_counter() - t0)
            statuses: dict[str, int] = {}
            for v in verdicts:
                name = {1: "CORRECT", 2: "WRONG_ANSWER", 5: "TIME_LIMIT", 9: "UNPARSED"}.get(
                    v.status, str(v.status)
                )
                statuses[name] = statuses.get(name, 0) + 1
            agree = sum((v.status == 1) == c.expected for v, c in zip(verdicts, cases, strict=True))
            overruns: dict[str, float] = {}
            bomb_status: dict[str, int] = {}
            for name, text in BOMBS.items():
                t0 = time.perf_counter()
                v = client.verify({"domain": "math", "gold": "3"}, text)
                overruns[name] = time.perf_counter() - t0 - DEADLINE_S
                bomb_status[name] = v.status
            case_overrun = -DEADLINE_S
            for item in items:
                t0 = time.perf_counter()
                client.verify(item.task, item.response)
                case_overrun = max(case_overrun, time.perf_counter() - t0 - DEADLINE_S)
    return {
        "seconds_per_pass": seconds,
        "agreement": agree / len(cases),
        "statuses_last_pass": statuses,
        "bomb_overrun_s": {k: round(v, 4) for k, v in overruns.items()},
        "bomb_status": bomb_status,
        "max_case_overrun_s": round(case_overrun, 4),
    }


def main() -> None:
    cases = load_cases()
    n = len(cases)
    mv = run_math_verify(cases)
    ours = run_certd(cases)
    rate = {
        "math_verify_2proc_first_pass": n / mv["seconds_per_pass"][0],
        "math_verify_2proc_repeat_passes": n / min(mv["seconds_per_pass"][1:]),
        "certd_grpc_first_pass": n / ours["seconds_per_pass"][0],
        "certd_grpc_repeat_passes": n / min(ours["seconds_per_pass"][1:]),
    }
    first = rate["certd_grpc_first_pass"] / rate["math_verify_2proc_first_pass"]
    repeat = rate["certd_grpc_repeat_passes"] / rate["math_verify_2proc_repeat_passes"]
    max_overrun = max([*ours["bomb_overrun_s"].values(), ours["max_case_overrun_s"]])
    write(
        "math",
        {
            "cases": n,
            "passes": PASSES,
            "note": "2-core machine shared with other work during the run",
            "certd_idle_before_pass_1_s": SETTLE_S,
            "math_verify": mv,
            "certd": ours,
            "cases_per_second": {k: round(v, 1) for k, v in rate.items()},
            "targets": {
                "agreement_at_least": 0.97,
                "agreement_measured": round(ours["agreement"], 4),
                "throughput_over_math_verify_at_least": 3.0,
                "throughput_ratio_first_pass": round(first, 2),
                "throughput_ratio_repeat_passes": round(repeat, 2),
                "max_deadline_overrun_at_most_s": 0.1,
                "max_deadline_overrun_measured_s": round(max_overrun, 4),
                "met": {
                    "agreement": ours["agreement"] >= 0.97,
                    "throughput_first_pass": first >= 3.0,
                    "throughput_repeat_passes": repeat >= 3.0,
                    "deadline": max_overrun <= 0.1,
                },
            },
        },
    )


if __name__ == "__main__":
    main()
