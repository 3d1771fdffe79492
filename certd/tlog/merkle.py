"""RFC 6962 / RFC 9162 Merkle tree hashing and proof construction (pure).

Example:
    >>> from certd.tlog import (
    ...     CompactRange, consistency_proof, inclusion_proof, leaf_hash, verify_consistency,
    ...     verify_inclusion)
    >>> tree, nodes = CompactRange(), {}
    >>> def add(data):
    ...     for level, index, h in tree.append(leaf_hash(data)):
    ...         nodes[level, index] = h
    >>> def node(level, index):
    ...     return nodes[level, index]
    >>> for data in (b"a", b"b", b"c"):
    ...     add(data)
    >>> root3 = tree.root()
    >>> verify_inclusion(leaf_hash(b"b"), 1, 3, inclusion_proof(1, 3, node), root3)
    >>> add(b"d")
    >>> verify_consistency(3, 4, consistency_proof(3, 4, node), root3, tree.root())

Hashes (RFC 9162 §2.1.1): ``leaf = SHA-256(0x00 || data)``, ``node = SHA-256(0x01 || l || r)``,
the empty tree's root is ``SHA-256("")``.

Nodes are named ``(level, index)``: the node at level ``k`` and index ``i`` is the root of
the *complete* subtree over leaves ``[i·2^k, (i+1)·2^k)``. A store keeps only complete
nodes; proof generation takes a ``node_fn(level, index)`` returning them and computes the
few *ephemeral* nodes on the right edge of a tree that is not a power of two in size.

``root_from_leaf_hashes``, ``reference_inclusion_proof`` and ``reference_consistency_proof``
are the literal recursive definitions of RFC 6962 §2.1 (MTH, PATH, PROOF/SUBPROOF); they
are slow and serve as the reference the fast functions are tested against. Verifying a proof
is in ``certd.tlog.proof``; the incremental frontier is ``certd.tlog.compact``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from certd.errors import ProofError

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "NodeFn",
    "consistency_proof",
    "consistency_proof_size",
    "decompose",
    "inclusion_proof",
    "inclusion_proof_size",
    "leaf_hash",
    "node_hash",
    "reference_consistency_proof",
    "reference_inclusion_proof",
    "root_from_leaf_hashes",
    "tree_root",
]

HASH_SIZE = 32
"""Bytes in a SHA-256 hash."""

EMPTY_ROOT = hashlib.sha256(b"").digest()
"""Root of the empty tree: SHA-256 of the empty string (RFC 9162 §2.1.1)."""

NodeFn = Callable[[int, int], bytes]
"""``node_fn(level, index)``: the hash of a complete subtree."""


def leaf_hash(data: bytes) -> bytes:
    """Hash a leaf.

    Args:
        data: the leaf's bytes (a log entry).

    Returns:
        ``SHA-256(0x00 || data)``.
    """
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Hash an interior node.

    Args:
        left: the left child's hash.
        right: the right child's hash.

    Returns:
        ``SHA-256(0x01 || left || right)``.
    """
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """Largest power of two strictly below ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


# --- RFC 6962 §2.1 reference definitions -------------------------------------------------


def root_from_leaf_hashes(leaf_hashes: Sequence[bytes]) -> bytes:
    """Compute the Merkle tree hash MTH(D[n]) literally as RFC 6962 §2.1 defines it.

    Args:
        leaf_hashes: the leaf hashes, in order.

    Returns:
        The root hash (``EMPTY_ROOT`` for no leaves).
    """
    n = len(leaf_hashes)
    if n == 0:
        return EMPTY_ROOT
    if n == 1:
        return leaf_hashes[0]
    k = _split(n)
    return node_hash(root_from_leaf_hashes(leaf_hashes[:k]), root_from_leaf_hashes(leaf_hashes[k:]))


def reference_inclusion_proof(leaf_hashes: Sequence[bytes], index: int) -> list[bytes]:
    """Compute PATH(m, D[n]) literally as RFC 6962 §2.1.1 defines it.

    Args:
        leaf_hashes: the leaf hashes of the whole tree.
        index: the leaf index m, ``0 <= m < n``.

    Raises:
        ProofError: the index is outside the tree.

    Returns:
        The audit path, from the leaf's sibling up.
    """
    n = len(leaf_hashes)
    if not 0 <= index < n:
        raise ProofError(f"expected 0 <= index < tree size {n}, got index {index}")
    if n == 1:
        return []
    k = _split(n)
    if index < k:
        return [
            *reference_inclusion_proof(leaf_hashes[:k], index),
            root_from_leaf_hashes(leaf_hashes[k:]),
        ]
    return [
        *reference_inclusion_proof(leaf_hashes[k:], index - k),
        root_from_leaf_hashes(leaf_hashes[:k]),
    ]


def _subproof(m: int, leaves: Sequence[bytes], complete: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if complete else [root_from_leaf_hashes(leaves)]
    k = _split(n)
    if m <= k:
        return [*_subproof(m, leaves[:k], complete), root_from_leaf_hashes(leaves[k:])]
    return [*_subproof(m - k, leaves[k:], False), root_from_leaf_hashes(leaves[:k])]


def reference_consistency_proof(leaf_hashes: Sequence[bytes], size1: int) -> list[bytes]:
    """Compute PROOF(m, D[n]) literally as RFC 6962 §2.1.2 defines it.

    Args:
        leaf_hashes: the leaf hashes of the second tree (size n).
        size1: the first tree's size m, ``0 < m <= n``.

    Raises:
        ProofError: ``size1`` is outside ``(0, n]``.

    Returns:
        The consistency proof (empty when ``m == n``).
    """
    n = len(leaf_hashes)
    if not 0 < size1 <= n:
        raise ProofError(f"expected 0 < size1 <= size2 {n}, got size1 {size1}")
    return _subproof(size1, leaf_hashes, True)


# --- Fast proofs over stored complete nodes ----------------------------------------------


def _range_root(begin: int, end: int, node_fn: NodeFn) -> bytes:
    """Root of leaves [begin, end) where ``begin`` is a multiple of 2^bit_length(end-begin-1).

    Such a range is a left-aligned RFC subtree: its complete parts are the set bits of
    ``end - begin``, largest first, and its root folds them from the right.
    """
    parts: list[bytes] = []
    size = end - begin
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            parts.append(node_fn(level, begin >> level))
            begin += 1 << level
    root = parts[-1]
    for h in reversed(parts[:-1]):
        root = node_hash(h, root)
    return root


def tree_root(size: int, node_fn: NodeFn) -> bytes:
    """Compute the root of the tree of ``size`` leaves from its complete subtrees.

    Args:
        size: the tree size, ``>= 0``.
        node_fn: returns complete-subtree hashes.

    Returns:
        The root hash (``EMPTY_ROOT`` for size 0).
    """
    if size < 0:
        raise ProofError(f"expected a tree size >= 0, got {size}")
    return EMPTY_ROOT if size == 0 else _range_root(0, size, node_fn)


def decompose(index: int, size: int) -> tuple[int, int]:
    """Split the audit path of ``index`` in a tree of ``size`` into (inner, border) counts.

    Inner levels are those below the level where the paths to ``index`` and to the last
    leaf ``size - 1`` meet; there every level has a sibling. Above it (the border) the path
    runs along the right edge and has a left sibling exactly where ``index`` has a one bit.
    """
    inner = (index ^ (size - 1)).bit_length()
    border = (index >> inner).bit_count()
    return inner, border


def _path(index: int, size: int, from_level: int, node_fn: NodeFn) -> list[bytes]:
    """Siblings on the path of leaf ``index`` in a tree of ``size``, from ``from_level`` up."""
    inner, _ = decompose(index, size)
    proof: list[bytes] = []
    for level in range(from_level, inner):
        sibling = (index >> level) ^ 1
        begin = sibling << level
        if begin + (1 << level) <= size:
            proof.append(node_fn(level, sibling))
        else:  # the one ephemeral node: a right sibling cut off by the tree's right edge
            proof.append(_range_root(begin, size, node_fn))
    for level in range(max(inner, from_level), size.bit_length()):
        if index >> level & 1:
            proof.append(node_fn(level, (index >> level) ^ 1))
    return proof


def inclusion_proof_size(index: int, size: int) -> int:
    """Number of hashes in the inclusion proof of ``index`` in a tree of ``size``.

    Args:
        index: the leaf index, ``0 <= index < size``.
        size: the tree size.

    Raises:
        ProofError: the index is outside the tree.

    Returns:
        The proof length.
    """
    if not 0 <= index < size:
        raise ProofError(f"expected 0 <= index < tree size {size}, got index {index}")
    inner, border = decompose(index, size)
    return inner + border


def inclusion_proof(index: int, size: int, node_fn: NodeFn) -> list[bytes]:
    """Build the inclusion proof (RFC 9162 §2.1.3.1) of a leaf.

    Args:
        index: the leaf index, ``0 <= index < size``.
        size: the tree size.
        node_fn: returns complete-subtree hashes of the tree (of at least ``size`` leaves).

    Raises:
        ProofError: the index is outside the tree.

    Returns:
        The audit path, from the leaf's sibling up.
    """
    inclusion_proof_size(index, size)
    return _path(index, size, 0, node_fn)


def consistency_proof_size(size1: int, size2: int) -> int:
    """Number of hashes in the consistency proof between two tree sizes.

    Args:
        size1: the first size.
        size2: the second size, ``>= size1``.

    Raises:
        ProofError: the sizes are negative or ``size1 > size2``.

    Returns:
        The proof length (0 when ``size1`` is 0 or equals ``size2``).
    """
    if not 0 <= size1 <= size2:
        raise ProofError(f"expected 0 <= size1 <= size2, got size1 {size1}, size2 {size2}")
    if size1 == 0 or size1 == size2:
        return 0
    shift = (size1 & -size1).bit_length() - 1
    inner, border = decompose(size1 - 1, size2)
    start = 0 if size1 == 1 << shift else 1
    return start + inner - shift + border


def consistency_proof(size1: int, size2: int, node_fn: NodeFn) -> list[bytes]:
    """Build the consistency proof (RFC 9162 §2.1.4.1) between two tree sizes.

    The proof is empty when ``size1 == size2`` and, as in transparency-dev/merkle, when
    ``size1 == 0`` (every tree extends the empty one; ``verify_consistency`` still refuses
    ``size1 == 0 < size2`` because such a check proves nothing).

    Args:
        size1: the first (older) tree size.
        size2: the second tree size, ``>= size1``.
        node_fn: returns complete-subtree hashes of the tree (of at least ``size2`` leaves).

    Raises:
        ProofError: the sizes are negative or ``size1 > size2``.

    Returns:
        The proof hashes.
    """
    if consistency_proof_size(size1, size2) == 0:
        return []
    # The proof is the inclusion path of leaf size1-1 in tree size2, less its lowest
    # `shift` levels (inside the complete subtree that ends tree 1), preceded by that
    # subtree's hash unless it is the whole of tree 1.
    shift = (size1 & -size1).bit_length() - 1
    prefix = [] if size1 == 1 << shift else [node_fn(shift, (size1 - 1) >> shift)]
    return prefix + _path(size1 - 1, size2, shift, node_fn)
