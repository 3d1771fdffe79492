"""Intervals over paired seeds: the 95% t interval and the percentile bootstrap.

Example:
    >>> interval([1.0, 2.0, 3.0])["t95"]
    [-0.48, 4.48]
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

__all__ = ["interval", "t975"]

# t_{0.975, df} for df = 1..30 (then 1.96).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
    2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
    2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (1.96 past 30)."""
    return _T975[df - 1] if df <= len(_T975) else 1.96


def interval(d: Sequence[float]) -> dict[str, Any]:
    """Mean of ``d`` (≥ 2 values), its 95% t interval, a 95% bootstrap (2,000 draws, seed 0)."""
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    rng = random.Random(0)
    boots = sorted(sum(rng.choice(d) for _ in range(n)) / n for _ in range(2000))
    return {
        "n": n, "mean": round(mean, 2), "t95": [round(mean - half, 2), round(mean + half, 2)],
        "boot95": [round(boots[49], 2), round(boots[1949], 2)], "diffs": [round(x, 2) for x in d],
    }  # fmt: skip
