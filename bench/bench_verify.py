"""Countdown verification rate: reasoning-gym's score_answer vs certd, same puzzles, one run.

Peer: ``reasoning_gym`` countdown ``score_answer`` (calls ``sympy.parse_expr`` on model text,
in process). Ours: ``verify_countdown`` in process, and ``VerifyBatch`` over gRPC on loopback
(batches of 1,000, a separate ``certd serve`` process, receipts signed and logged).

Run: ``.venv/bin/python bench/bench_verify.py`` → ``bench/results/verify.json``.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from _common import median, timed_runs, write

from certd.domains import countdown as cd
from certd.domains.verdict import Status
from forkgate import CertdClient, VerifyItem
from forkgate.local import LocalCertd
from forkgate.puzzles import countdown_puzzles

N_PUZZLES = 250
PER_PUZZLE = 8  # 2,000 answers
REPEATS = 5


def answers() -> list[tuple[dict[str, object], str]]:
    """Per puzzle: correct witnesses and wrong-but-well-formed answers (model-like)."""
    rng = random.Random(0)
    out = []
    for p in countdown_puzzles(N_PUZZLES, seed=11):
        task = cd.CountdownTask(numbers=tuple(p["numbers"]), target=int(p["target"]))
        found = cd.enumerate_families(task)
        exprs = [lw.witness for lw in found.labels]
        nums = [str(x) for x in p["numbers"]]
        while len(exprs) < PER_PUZZLE:
            rng.shuffle(nums)
            ops = [rng.choice("+-*/") for _ in nums[1:]]
            exprs.append(nums[0] + "".join(o + n for o, n in zip(ops, nums[1:], strict=True)))
        out.extend((p, e) for e in exprs[:PER_PUZZLE])
    return out


def _grpc_runs(
    pairs: list[tuple[dict[str, object], str]], responses: list[str]
) -> tuple[list[float], list[float]]:
    """Wall seconds of VerifyBatch over all answers: plain, then with receipts checked."""
    with tempfile.TemporaryDirectory() as tmp:
        with LocalCertd(Path(tmp) / "d") as certd:
            address, vkey = certd.address, certd.vkey
            items = [
                VerifyItem(p, r, str(i))
                for i, ((p, _), r) in enumerate(zip(pairs, responses, strict=True))
            ]
            with CertdClient(address) as client:
                client.verify_batch(items[:1000])  # warm-up
                grpc_s = timed_runs(lambda: client.verify_batch(items), REPEATS)
            with CertdClient(address, trusted_keys=[vkey]) as client:
                grpc_checked_s = timed_runs(lambda: client.verify_batch(items), REPEATS)
    return grpc_s, grpc_checked_s


def main() -> None:
    import reasoning_gym

    pairs = answers()
    rg = reasoning_gym.create_dataset("countdown", size=1, seed=0)
    rg_entries = [{"metadata": {"numbers": p["numbers"], "target": p["target"]}} for p, _ in pairs]
    ours_tasks = [
        cd.CountdownTask(numbers=tuple(p["numbers"]), target=int(p["target"])) for p, _ in pairs
    ]
    responses = [f"<answer>{a}</answer>" for _, a in pairs]

    def run_rg() -> None:
        for (_, a), entry in zip(pairs, rg_entries, strict=True):
            rg.score_answer(a, entry)

    def run_ours() -> None:
        for t, r in zip(ours_tasks, responses, strict=True):
            cd.verify_countdown(t, r)

    # Agreement check: both must call the same answers correct.
    disagree = sum(
        (rg.score_answer(a, e) == 1.0) != (cd.verify_countdown(t, r).status is Status.CORRECT)
        for (_, a), e, t, r in zip(pairs, rg_entries, ours_tasks, responses, strict=True)
    )
    rg_s = timed_runs(run_rg, REPEATS)
    ours_s = timed_runs(run_ours, REPEATS)

    grpc_s, grpc_checked_s = _grpc_runs(pairs, responses)
    n = len(pairs)
    rates = {
        "reasoning_gym_score_answer_in_process": n / median(rg_s),
        "certd_in_process": n / median(ours_s),
        "certd_grpc_verifybatch_1000": n / median(grpc_s),
        "certd_grpc_verifybatch_1000_client_checks_receipts": n / median(grpc_checked_s),
    }
    ratio = rates["certd_grpc_verifybatch_1000"] / rates["reasoning_gym_score_answer_in_process"]
    write(
        "verify",
        {
            "answers": n,
            "repeats": REPEATS,
            "disagreements_on_correct": disagree,
            "median_seconds": {
                "reasoning_gym": median(rg_s),
                "certd_in_process": median(ours_s),
                "certd_grpc": median(grpc_s),
                "certd_grpc_checked": median(grpc_checked_s),
            },
            "answers_per_second": {k: round(v, 1) for k, v in rates.items()},
            "target": {
                "grpc_over_reasoning_gym_at_least": 5.0,
                "measured_ratio": round(ratio, 2),
                "met": ratio >= 5.0,
            },
        },
    )


if __name__ == "__main__":
    main()
