"""Agreement of two partitions of the same rollouts: adjusted Rand index, purity, class counts.

Example:
    >>> adjusted_rand_index(["a", "a", "b", "b"], ["x", "x", "y", "y"])
    1.0
    >>> purity(["k1", "k1", "k1", "k2"], ["a", "a", "b", "c"])
    0.75
    >>> round(adjusted_rand_index(["a", "a", "b", "b"], ["x", "y", "x", "y"]), 3)
    -0.5

``adjusted_rand_index`` is Hubert and Arabie's (1985) ARI: the Rand index corrected for
chance, 1 for identical partitions, about 0 for independent ones (it can be negative).
When both partitions put everything in one class (or both make every item its own class),
they agree and the ARI is 1. ``purity`` is the share of items whose predicted cluster's most
common gold class is their own: 1 when every cluster is gold-pure (a partition finer than the
gold one is pure too, which is why the number of classes is reported beside it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from math import comb

__all__ = ["adjusted_rand_index", "purity"]


def adjusted_rand_index(gold: Sequence[Hashable], predicted: Sequence[Hashable]) -> float:
    """Hubert–Arabie adjusted Rand index of two labelings of the same items.

    Raises:
        ValueError: the two sequences differ in length.

    Returns:
        The ARI (1.0 for fewer than two items).
    """
    if len(gold) != len(predicted):
        raise ValueError(f"expected labelings of equal length, got {len(gold)}, {len(predicted)}")
    n = len(gold)
    if n < 2:
        return 1.0
    pairs = Counter(zip(gold, predicted, strict=True))
    index = sum(comb(c, 2) for c in pairs.values())
    rows = sum(comb(c, 2) for c in Counter(gold).values())
    cols = sum(comb(c, 2) for c in Counter(predicted).values())
    total = comb(n, 2)
    expected = rows * cols / total
    maximum = (rows + cols) / 2
    if maximum == expected:
        return 1.0
    return (index - expected) / (maximum - expected)


def purity(predicted: Sequence[Hashable], gold: Sequence[Hashable]) -> float:
    """Share of items whose predicted cluster's majority gold class is theirs.

    Raises:
        ValueError: the two sequences differ in length.

    Returns:
        Purity in 0..1 (1.0 for no items).
    """
    if len(gold) != len(predicted):
        raise ValueError(f"expected labelings of equal length, got {len(gold)}, {len(predicted)}")
    if not gold:
        return 1.0
    by_cluster: dict[Hashable, Counter[Hashable]] = {}
    for p, g in zip(predicted, gold, strict=True):
        by_cluster.setdefault(p, Counter())[g] += 1
    return sum(max(c.values()) for c in by_cluster.values()) / len(gold)
