"""EC@K, the unbiased estimator from per-family correct counts: the one place EC is computed.

Example:
    >>> round(ec_at_k_counts({"a": 2, "b": 0}, n=4, k=2, feasible=2), 4)
    0.4167
    >>> ec_at_k_counts({"a": 2, "b": 1}, n=4, k=4, feasible=2)
    1.0

Definition (``docs/metrics.md``): with n ≥ K draws of a task, of which c_f are correct and in
feasible family f, the expected number of distinct families among the correct samples of K
draws taken without replacement from the n is Σ_f (1 − C(n − c_f, K) / C(n, K)) — the pass@k
construction of Chen et al. (2021) applied per family. EC@K is that sum ÷ the task's feasible
families. With n = K it is the plain count of distinct correct families ÷ feasible; with n > K
the plain count over all n draws is "EC over n draws", an upward-biased estimate of EC@K.

Records keep ``family_correct`` (family → correct count) and ``samples`` (n) per task, so any
K ≤ n can be recomputed offline (``ec_of_rows``). ``multi`` figures are over the tasks with at
least two feasible families, reported beside the all-task figure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from certd.effective_support import pass_at_k

__all__ = [
    "ec_at_k_counts",
    "ec_of_rows",
    "family_correct_counts",
    "solution_coverage",
    "solution_coverage_of_rows",
]


def ec_at_k_counts(family_correct: Mapping[str, int], *, n: int, k: int, feasible: int) -> float:
    """Unbiased EC@K of one task from its per-family correct counts over ``n`` ≥ ``k`` draws.

    Args:
        family_correct: per family, its correct samples among the n draws (zero counts allowed).
        n: the draws of the task.
        k: the budget K.
        feasible: the task's feasible families.

    Returns:
        The estimate; 0.0 when ``feasible`` is 0.

    Raises:
        ValueError: k < 1, n < k, a negative count, or counts summing above n.
    """
    if k < 1 or n < k:
        raise ValueError(f"EC@K needs 1 <= K <= n, got K={k}, n={n}")
    counts = [int(c) for c in family_correct.values()]
    if any(c < 0 for c in counts) or sum(counts) > n:
        raise ValueError(f"family counts {counts} are not counts of {n} draws")
    if feasible <= 0:
        return 0.0
    return sum(pass_at_k(n, c, k) for c in counts if c) / feasible


def family_correct_counts(correct_families: Iterable[str]) -> dict[str, int]:
    """Per family, how many correct samples fall in it (the record's ``family_correct``)."""
    return dict(Counter(str(f) for f in correct_families))


def solution_coverage(correct_solutions: Sequence[str]) -> float | None:
    """Distinct canonical solutions ÷ correct solutions; None when there are none.

    Example:
        >>> solution_coverage(["3+4*(25-5)", "3+4*(25-5)", "5*(25-3)-4", "83"])
        0.75
    """
    if not correct_solutions:
        return None
    return round(len(set(correct_solutions)) / len(correct_solutions), 4)


def solution_coverage_of_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | int | None]:
    """Solution coverage over task rows: Σ distinct canonical solutions ÷ Σ correct solutions.

    Each row keeps ``solution_counts`` (canonical solution → correct samples), so the figure
    is recomputed offline from the records; rows without it count nothing. Solutions of two
    tasks are never one solution (distinct counts add over tasks).

    Example:
        >>> rows = [{"solution_counts": {"a": 3, "b": 1}}, {"solution_counts": {"a": 4}}]
        >>> solution_coverage_of_rows(rows)
        {'solutions': 8, 'distinct_solutions': 3, 'solution_coverage': 0.375}

    Returns:
        ``{"solutions", "distinct_solutions", "solution_coverage"}`` (None with no solution).
    """
    counts = [r["solution_counts"] for r in rows if r.get("solution_counts") is not None]
    solutions = sum(int(c) for row in counts for c in row.values())
    distinct = sum(sum(1 for c in row.values() if c) for row in counts)
    return {
        "solutions": solutions,
        "distinct_solutions": distinct,
        "solution_coverage": round(distinct / solutions, 4) if solutions else None,
    }


def ec_of_rows(rows: Sequence[Mapping[str, Any]], k: int) -> dict[str, float | int | None]:
    """Mean unbiased EC@K over task rows, all tasks and multi-family tasks.

    Each row needs ``family_correct``, ``samples`` and ``feasible`` (what ``forkgate run`` and
    the experiment record). Rows with fewer than ``k`` samples raise ``ValueError``.

    Returns:
        ``{"EC@K": all-task mean, "EC@K multi": multi-family mean or None, "multi_tasks": count}``.
    """
    all_, multi = [], []
    for r in rows:
        ec = ec_at_k_counts(r["family_correct"], n=r["samples"], k=k, feasible=r["feasible"])
        all_.append(ec)
        if r["feasible"] >= 2:
            multi.append(ec)
    return {
        f"EC@{k}": round(sum(all_) / len(all_), 4) if all_ else 0.0,
        f"EC@{k} multi": round(sum(multi) / len(multi), 4) if multi else None,
        "multi_tasks": len(multi),
    }
