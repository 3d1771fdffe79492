"""The audit's chunk path: a subtree appended by its root equals its leaves appended one by
one, and a chunk's root is trusted only when every stored node of it matches."""

from __future__ import annotations

import os
import random

import pytest

from certd.errors import ProofError
from certd.ledger.auditchunk import subtree_root
from certd.tlog import CompactRange
from certd.tlog.merkle import node_hash


def _levels(leaves: list[bytes]) -> list[list[bytes]]:
    out = [leaves]
    while len(out[-1]) > 1:
        prev = out[-1]
        out.append([node_hash(prev[i], prev[i + 1]) for i in range(0, len(prev), 2)])
    return out


def test_append_subtree_equals_appending_its_leaves() -> None:
    rng = random.Random(7)
    for _ in range(60):
        level = rng.randint(0, 5)
        leaves = [os.urandom(32) for _ in range(rng.randint(1, 12) << level)]
        one, block = CompactRange(), CompactRange()
        by_leaf, by_root = [], []
        for i in range(0, len(leaves), 1 << level):
            chunk = leaves[i : i + (1 << level)]
            for leaf in chunk:
                by_leaf.extend(one.append(leaf))
            by_root.extend(block.append_subtree(level, _levels(chunk)[-1][0]))
        assert (block.size, block.hashes, block.root()) == (one.size, one.hashes, one.root())
        assert by_root == [c for c in by_leaf if c[0] >= level]
    with pytest.raises(ProofError):
        CompactRange(3, [os.urandom(32), os.urandom(32)]).append_subtree(1, os.urandom(32))


def test_subtree_root_only_when_every_stored_node_matches() -> None:
    start, leaves = 16, [os.urandom(32) for _ in range(8)]
    levels = _levels(leaves)
    stored = {(lv, (start >> lv) + i): h for lv, hs in enumerate(levels) for i, h in enumerate(hs)}

    def read(level: int, lo: int, hi: int) -> list[bytes | None]:
        return [stored.get((level, i)) for i in range(lo, hi)]

    assert subtree_root(read, start, leaves) == levels[-1][0]
    assert subtree_root(read, start + 8, leaves) is None  # other indexes: nothing stored
    assert subtree_root(read, 4, leaves) is None  # not aligned
    assert subtree_root(read, start, leaves[:6]) is None  # not a complete subtree
    for key in list(stored):
        saved = stored[key]
        stored[key] = os.urandom(32)  # one wrong stored node, at any level
        assert subtree_root(read, start, leaves) is None, key
        del stored[key]  # one missing
        assert subtree_root(read, start, leaves) is None, key
        stored[key] = saved
