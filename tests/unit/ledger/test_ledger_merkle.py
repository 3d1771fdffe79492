"""Merkle proofs: fast vs RFC-literal reference, and mutation negatives."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from certd.errors import ProofError
from certd.tlog import (
    EMPTY_ROOT,
    CompactRange,
    consistency_proof,
    consistency_proof_size,
    inclusion_proof,
    inclusion_proof_size,
    leaf_hash,
    node_hash,
    reference_consistency_proof,
    reference_inclusion_proof,
    root_from_leaf_hashes,
    tree_root,
    verify_consistency,
    verify_inclusion,
)

NodeFn = Callable[[int, int], bytes]


def build(n: int) -> tuple[list[bytes], NodeFn, CompactRange]:
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(n)]
    nodes: dict[tuple[int, int], bytes] = {}
    tree = CompactRange()
    for leaf in leaves:
        for level, index, h in tree.append(leaf):
            nodes[level, index] = h

    def node(level: int, index: int) -> bytes:
        # Only complete subtrees exist: asking for anything else is a bug in the caller.
        assert (index + 1) << level <= n, f"node ({level}, {index}) is not complete in {n}"
        return nodes[level, index]

    return leaves, node, tree


def _incl(
    leaf: bytes, index: int, size: int, proof: list[bytes], root: bytes
) -> Callable[[], None]:
    return lambda: verify_inclusion(leaf, index, size, proof, root)


def _cons(s1: int, s2: int, proof: list[bytes], r1: bytes, r2: bytes) -> Callable[[], None]:
    return lambda: verify_consistency(s1, s2, proof, r1, r2)


def flip(b: bytes, bit: int = 0) -> bytes:
    out = bytearray(b)
    out[bit // 8 % len(out)] ^= 1 << (bit % 8)
    return bytes(out)


def test_hashes() -> None:
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert leaf_hash(b"") != node_hash(b"", b"")  # domain separation


def test_roots_fast_vs_reference_sizes_0_to_300() -> None:
    leaves, node, tree = build(300)
    rebuilt = CompactRange()
    for n in range(301):
        want = root_from_leaf_hashes(leaves[:n])
        assert tree_root(n, node) == want, n
        assert rebuilt.root() == want, n
        if n < 300:
            rebuilt.append(leaves[n])
    assert tree.root() == root_from_leaf_hashes(leaves)


def test_proofs_exhaustive_up_to_64() -> None:
    leaves, node, _ = build(64)
    for n in range(1, 65):
        root = root_from_leaf_hashes(leaves[:n])
        for i in range(n):
            proof = inclusion_proof(i, n, node)
            assert proof == reference_inclusion_proof(leaves[:n], i), (i, n)
            assert len(proof) == inclusion_proof_size(i, n)
            verify_inclusion(leaves[i], i, n, proof, root)
        for m in range(1, n + 1):
            proof = consistency_proof(m, n, node)
            assert proof == reference_consistency_proof(leaves[:n], m), (m, n)
            assert len(proof) == consistency_proof_size(m, n)
            verify_consistency(m, n, proof, root_from_leaf_hashes(leaves[:m]), root)


def test_proofs_random_sizes_up_to_300() -> None:
    rng = random.Random(6962)
    leaves, node, _ = build(300)
    roots = [root_from_leaf_hashes(leaves[:n]) for n in range(301)]
    for _ in range(300):
        n = rng.randint(1, 300)
        i = rng.randrange(n)
        proof = inclusion_proof(i, n, node)
        assert proof == reference_inclusion_proof(leaves[:n], i)
        verify_inclusion(leaves[i], i, n, proof, roots[n])
        m = rng.randint(1, n)
        cproof = consistency_proof(m, n, node)
        assert cproof == reference_consistency_proof(leaves[:n], m)
        verify_consistency(m, n, cproof, roots[m], roots[n])


CASES = [(0, 1), (0, 2), (1, 2), (2, 3), (4, 5), (5, 8), (6, 7), (13, 21), (31, 32), (0, 33)]


@pytest.mark.parametrize(("index", "size"), CASES)
def test_inclusion_mutations_rejected(index: int, size: int) -> None:
    leaves, node, _ = build(size + 1)
    root = root_from_leaf_hashes(leaves[:size])
    proof = inclusion_proof(index, size, node)
    leaf = leaves[index]
    verify_inclusion(leaf, index, size, proof, root)

    bad: list[tuple[str, Callable[[], None]]] = []
    for k in range(len(proof)):
        for bit in (0, 100, 255):
            p = list(proof)
            p[k] = flip(p[k], bit)
            bad.append((f"flip proof[{k}] bit {bit}", _incl(leaf, index, size, p, root)))
    bad += [
        ("flip leaf", lambda: verify_inclusion(flip(leaf), index, size, proof, root)),
        ("flip root", lambda: verify_inclusion(leaf, index, size, proof, flip(root, 7))),
        ("index + 1", lambda: verify_inclusion(leaf, index + 1, size, proof, root)),
        ("index - 1", lambda: verify_inclusion(leaf, index - 1, size, proof, root)),
        ("index ^ 2", lambda: verify_inclusion(leaf, index ^ 2, size, proof, root)),
        ("size * 2", lambda: verify_inclusion(leaf, index, size * 2, proof, root)),
        ("truncated", lambda: verify_inclusion(leaf, index, size, proof[:-1], root)),
        ("extended", lambda: verify_inclusion(leaf, index, size, [*proof, leaf], root)),
        ("prepended", lambda: verify_inclusion(leaf, index, size, [root, *proof], root)),
        ("wrong leaf", lambda: verify_inclusion(leaves[size], index, size, proof, root)),
        ("short root", lambda: verify_inclusion(leaf, index, size, proof, root[:31])),
        ("short leaf", lambda: verify_inclusion(leaf[:31], index, size, proof, root)),
    ]
    if size // 2 > index:
        bad.append(("size / 2", lambda: verify_inclusion(leaf, index, size // 2, proof, root)))
    # Not listed: size ± 1. An RFC 6962 path does not always pin the size (leaf 5's path
    # in trees of 7 and 8 uses the same hashing steps); the signed checkpoint binds size
    # and root together, which is why proofs are checked against a checkpoint.
    for desc, call in bad:
        if desc == "index - 1" and index == 0:
            continue
        if desc == "truncated" and not proof:
            continue
        with pytest.raises(ProofError):
            call()
            pytest.fail(f"accepted: {desc}")


CONSISTENCY_CASES = [(1, 2), (1, 8), (2, 5), (3, 7), (4, 8), (6, 8), (7, 8), (8, 13), (13, 31)]


@pytest.mark.parametrize(("size1", "size2"), CONSISTENCY_CASES)
def test_consistency_mutations_rejected(size1: int, size2: int) -> None:
    leaves, node, _ = build(size2 + 1)
    r1 = root_from_leaf_hashes(leaves[:size1])
    r2 = root_from_leaf_hashes(leaves[:size2])
    proof = consistency_proof(size1, size2, node)
    verify_consistency(size1, size2, proof, r1, r2)

    cases: list[tuple[str, Callable[[], None]]] = []
    for k in range(len(proof)):
        p = list(proof)
        p[k] = flip(p[k], 4)
        cases.append((f"flip proof[{k}]", _cons(size1, size2, p, r1, r2)))
    cases += [
        ("flip root1", lambda: verify_consistency(size1, size2, proof, flip(r1), r2)),
        ("flip root2", lambda: verify_consistency(size1, size2, proof, r1, flip(r2))),
        ("swapped roots", lambda: verify_consistency(size1, size2, proof, r2, r1)),
        ("size1 + 1", lambda: verify_consistency(size1 + 1, size2, proof, r1, r2)),
        ("size1 - 1", lambda: verify_consistency(size1 - 1, size2, proof, r1, r2)),
        ("size1 ^ 2", lambda: verify_consistency(size1 ^ 2, size2, proof, r1, r2)),
        ("size2 * 2", lambda: verify_consistency(size1, size2 * 2, proof, r1, r2)),
        ("size2 / 2", lambda: verify_consistency(size1, size2 // 2, proof, r1, r2)),
        ("truncated", lambda: verify_consistency(size1, size2, proof[:-1], r1, r2)),
        ("extended", lambda: verify_consistency(size1, size2, [*proof, r1], r1, r2)),
        ("prepended", lambda: verify_consistency(size1, size2, [r1, *proof], r1, r2)),
        ("empty", lambda: verify_consistency(size1, size2, [], r1, r2)),
        ("sizes swapped", lambda: verify_consistency(size2, size1, proof, r2, r1)),
    ]
    # As for inclusion, size2 ± 1 is not always detectable from the proof alone.
    for desc, call in cases:
        if desc == "size1 ^ 2" and size1 ^ 2 in (0, size2):
            continue
        with pytest.raises(ProofError):
            call()
            pytest.fail(f"accepted: {desc}")


def test_consistency_edge_cases() -> None:
    leaves, node, _ = build(4)
    r = root_from_leaf_hashes(leaves)
    verify_consistency(4, 4, [], r, r)
    verify_consistency(0, 0, [], EMPTY_ROOT, EMPTY_ROOT)
    assert consistency_proof(0, 4, node) == []
    assert consistency_proof(4, 4, node) == []
    with pytest.raises(ProofError, match="consistency with the empty tree proves nothing"):
        verify_consistency(0, 4, [], EMPTY_ROOT, r)
    with pytest.raises(ProofError, match="expected an empty proof for equal sizes"):
        verify_consistency(4, 4, [r], r, r)
    with pytest.raises(ProofError, match="expected equal roots"):
        verify_consistency(4, 4, [], r, flip(r))
    with pytest.raises(ProofError, match="empty-tree root"):
        verify_consistency(0, 0, [], r, r)
    with pytest.raises(ProofError, match="size1 <= size2"):
        consistency_proof(5, 4, node)


def test_error_messages_say_expected_and_got() -> None:
    leaves, node, _ = build(5)
    root = root_from_leaf_hashes(leaves)
    proof = inclusion_proof(1, 5, node)
    with pytest.raises(ProofError, match=r"expected 3 hashes in the inclusion proof, got 2"):
        verify_inclusion(leaves[1], 1, 5, proof[:2], root)
    with pytest.raises(ProofError, match=rf"expected root {flip(root).hex()}, got {root.hex()}"):
        verify_inclusion(leaves[1], 1, 5, proof, flip(root))
    with pytest.raises(ProofError, match=r"expected 0 <= index < tree size 5, got index 5"):
        verify_inclusion(leaves[1], 5, 5, proof, root)
    with pytest.raises(ProofError, match=r"expected a 32-byte leaf hash, got 3 bytes"):
        verify_inclusion(b"abc", 1, 5, proof, root)


def test_compact_range() -> None:
    leaves, node, tree = build(13)
    assert CompactRange.frontier_ids(13) == [(3, 0), (2, 2), (0, 12)]
    loaded = CompactRange.from_node_fn(13, node)
    assert loaded.hashes == tree.hashes and loaded.root() == tree.root()
    copy = loaded.copy()
    created = copy.append(leaf_hash(b"x"))
    assert [(lv, ix) for lv, ix, _ in created] == [(0, 13), (1, 6)]
    assert loaded.size == 13 and copy.size == 14
    more = CompactRange()
    assert [(lv, ix) for lv, ix, _ in more.extend(leaves[:4])] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (0, 2),
        (0, 3),
        (1, 1),
        (2, 0),
    ]
    with pytest.raises(ProofError, match="expected 3 frontier hashes"):
        CompactRange(13, tree.hashes[:2])
    with pytest.raises(ProofError):
        more.append(b"short")
