"""Exhaustive family enumeration time for 4-, 5- and 6-number Countdown puzzles.

No peer ships an entry-family enumerator; the targets come from the issue: 4 numbers under
5 ms median, 6 numbers (75,50,2,3,8,7 → 812 and others) under 0.5 s median.

Run: ``.venv/bin/python bench/bench_enumerate.py`` → ``bench/results/enumerate.json``.
"""

from __future__ import annotations

from _common import median, timed_runs, write

from certd.domains import countdown as cd
from forkgate.puzzles import countdown_puzzles

SIX = [((75, 50, 2, 3, 8, 7), 812)]


def measure(puzzles: list[tuple[tuple[int, ...], int]], repeats: int) -> dict[str, object]:
    per_puzzle = []
    labels, families, incomplete = [], [], 0
    for numbers, target in puzzles:
        task = cd.CountdownTask(numbers=numbers, target=target)
        per_puzzle.append(median(timed_runs(lambda t=task: cd.enumerate_families(t), repeats)))
        found = cd.enumerate_families(task)
        labels.append(len(found.labels))
        families.append(len(found.families))
        incomplete += not found.complete
    return {
        "puzzles": len(puzzles),
        "median_ms": round(median(per_puzzle) * 1e3, 3),
        "max_ms": round(max(per_puzzle) * 1e3, 3),
        "median_labels": median([float(x) for x in labels]),
        "median_families": median([float(x) for x in families]),
        "families_capped": incomplete,
    }


def main() -> None:
    def gen(n: int, count: int, seed: int) -> list[tuple[tuple[int, ...], int]]:
        return [
            (tuple(p["numbers"]), int(p["target"]))
            for p in countdown_puzzles(count, numbers=n, seed=seed)
        ]

    four = measure(gen(4, 100, 1), repeats=5)
    five = measure(gen(5, 20, 2), repeats=3)
    six = measure(SIX + gen(6, 9, 3), repeats=3)
    fixed = measure(SIX, repeats=5)
    write(
        "enumerate",
        {
            "4_numbers": four,
            "5_numbers": five,
            "6_numbers": six,
            "75_50_2_3_8_7_to_812": fixed,
            "targets": {
                "4_numbers_median_ms_under": 5.0,
                "4_met": four["median_ms"] < 5.0,  # type: ignore[operator]
                "6_numbers_median_ms_under": 500.0,
                "6_met": six["median_ms"] < 500.0,  # type: ignore[operator]
            },
        },
    )


if __name__ == "__main__":
    main()
