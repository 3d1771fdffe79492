"""Receipt batch trees: the fast bottom-up paths against the RFC-literal reference."""

from __future__ import annotations

import hashlib

import pytest

from certd import tlog
from certd.statements import batch_tree


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 31, 33, 100, 257])
def test_batch_tree_matches_the_reference(n: int) -> None:
    digests = [hashlib.sha256(str(i).encode()).digest() for i in range(n)]
    root, paths = batch_tree(digests)
    leaves = [tlog.leaf_hash(d) for d in digests]
    assert root == tlog.root_from_leaf_hashes(leaves)
    for i, path in enumerate(paths):
        assert path == tlog.reference_inclusion_proof(leaves, i)
        tlog.verify_inclusion(leaves[i], i, n, path, root)


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        batch_tree([])
