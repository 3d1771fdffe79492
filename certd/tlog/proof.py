"""Verifying RFC 6962 / RFC 9162 inclusion and consistency proofs (pure).

Example:
    >>> from certd.tlog.merkle import leaf_hash, node_hash
    >>> from certd.tlog.proof import verify_inclusion
    >>> a, b = leaf_hash(b"a"), leaf_hash(b"b")
    >>> verify_inclusion(b, 1, 2, [a], node_hash(a, b))

Computing a root from a proof (``root_from_*``) is separate from comparing it with a trusted
root (``verify_*``), as in transparency-dev/merkle: the first raise ``ProofError`` for a
malformed proof, the second ``RootMismatchError`` when the proof leads elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from certd.errors import ProofError, RootMismatchError
from certd.tlog.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    consistency_proof_size,
    decompose,
    inclusion_proof_size,
    node_hash,
)

__all__ = [
    "check_hash",
    "root_from_consistency_proof",
    "root_from_inclusion_proof",
    "verify_consistency",
    "verify_inclusion",
]


def check_hash(h: bytes, what: str) -> None:
    """Raise ``ProofError`` unless ``h`` is a 32-byte hash; ``what`` names it in the message."""
    if len(h) != HASH_SIZE:
        raise ProofError(f"expected a {HASH_SIZE}-byte {what}, got {len(h)} bytes")


def _check_proof(proof: Sequence[bytes], want: int, what: str) -> None:
    if len(proof) != want:
        raise ProofError(f"expected {want} hashes in the {what}, got {len(proof)}")
    for i, h in enumerate(proof):
        check_hash(h, f"hash at {what} position {i}")


def root_from_inclusion_proof(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes]
) -> bytes:
    """Compute the root an inclusion proof implies (RFC 9162 §2.1.3.2), without comparing.

    Preconditions, checked first: ``0 <= index < size``; ``leaf_hash`` and every proof
    hash are 32 bytes; the proof has exactly ``inclusion_proof_size(index, size)`` hashes.

    Args:
        leaf_hash: the leaf's hash.
        index: the leaf index.
        size: the tree size.
        proof: the audit path.

    Raises:
        ProofError: a precondition fails.

    Returns:
        The implied root hash.
    """
    want = inclusion_proof_size(index, size)
    check_hash(leaf_hash, "leaf hash")
    _check_proof(proof, want, "inclusion proof")
    inner, _ = decompose(index, size)
    h = leaf_hash
    for level, p in enumerate(proof[:inner]):
        h = node_hash(p, h) if index >> level & 1 else node_hash(h, p)
    for p in proof[inner:]:
        h = node_hash(p, h)
    return h


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Verify that a leaf is at ``index`` in the tree of ``size`` with ``root``.

    Preconditions are those of ``root_from_inclusion_proof``, and ``root`` is 32 bytes.

    Args:
        leaf_hash: the leaf's hash (``leaf_hash(entry)``).
        index: the leaf index.
        size: the tree size.
        proof: the audit path.
        root: the trusted root hash of the tree of ``size``.

    Raises:
        ProofError: a precondition fails or the proof implies a different root.
    """
    check_hash(root, "root")
    got = root_from_inclusion_proof(leaf_hash, index, size, proof)
    if got != root:
        raise RootMismatchError(
            f"expected root {root.hex()}, got {got.hex()} from the inclusion proof "
            f"of index {index} in tree size {size}",
            expected=root,
            got=got,
        )


def root_from_consistency_proof(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes
) -> tuple[bytes, bytes]:
    """Compute both roots a consistency proof implies (RFC 9162 §2.1.4.2), without comparing.

    Preconditions, checked first: ``0 < size1 < size2``; ``root1`` and every proof hash
    are 32 bytes; the proof has exactly ``consistency_proof_size(size1, size2)`` hashes.
    When ``size1`` is a power of two the proof omits tree 1's root and ``root1`` seeds
    the computation, so the first returned root is ``root1`` itself.

    Args:
        size1: the first tree size.
        size2: the second tree size.
        proof: the consistency proof.
        root1: the first tree's root.

    Raises:
        ProofError: a precondition fails.

    Returns:
        (the implied first root, the implied second root).
    """
    if not 0 < size1 < size2:
        raise ProofError(f"expected 0 < size1 < size2, got size1 {size1}, size2 {size2}")
    check_hash(root1, "root1")
    _check_proof(proof, consistency_proof_size(size1, size2), "consistency proof")
    shift = (size1 & -size1).bit_length() - 1
    inner, _ = decompose(size1 - 1, size2)
    inner -= shift
    if size1 == 1 << shift:
        seed, rest = root1, list(proof)
    else:
        seed, rest = proof[0], list(proof[1:])
    mask = (size1 - 1) >> shift
    h1 = h2 = seed
    for level, p in enumerate(rest[:inner]):
        if mask >> level & 1:  # a left sibling: inside both trees
            h1 = node_hash(p, h1)
            h2 = node_hash(p, h2)
        else:  # a right sibling: only in tree 2
            h2 = node_hash(h2, p)
    for p in rest[inner:]:
        h1 = node_hash(p, h1)
        h2 = node_hash(p, h2)
    return h1, h2


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """Verify that the tree of ``size2`` with ``root2`` extends the tree of ``size1``.

    Checked in this order:

    1. ``0 <= size1 <= size2``.
    2. ``size1 == size2``: the proof is empty and ``root1 == root2``; for size 0 both
       must be ``EMPTY_ROOT``.
    3. ``size1 == 0 < size2`` is refused: consistency with the empty tree proves nothing.
    4. Otherwise the preconditions of ``root_from_consistency_proof``, then both implied
       roots must equal ``root1`` and ``root2``.

    Args:
        size1: the first (trusted, older) tree size.
        size2: the second tree size.
        proof: the consistency proof.
        root1: the first tree's root.
        root2: the second tree's root.

    Raises:
        ProofError: a check fails; the message says which, with expected and actual values.
    """
    if not 0 <= size1 <= size2:
        raise ProofError(f"expected 0 <= size1 <= size2, got size1 {size1}, size2 {size2}")
    if size1 == size2:
        if proof:
            raise ProofError(f"expected an empty proof for equal sizes, got {len(proof)} hashes")
        if root1 != root2:
            raise RootMismatchError(
                f"expected equal roots for equal sizes {size1}, "
                f"got {root1.hex()} and {root2.hex()}",
                expected=root1,
                got=root2,
            )
        if size1 == 0 and root1 != EMPTY_ROOT:
            raise ProofError(f"expected the empty-tree root {EMPTY_ROOT.hex()}, got {root1.hex()}")
        return
    if size1 == 0:
        raise ProofError(
            f"expected size1 > 0, got 0: consistency with the empty tree proves nothing "
            f"(size2 {size2})"
        )
    check_hash(root2, "root2")
    got1, got2 = root_from_consistency_proof(size1, size2, proof, root1)
    if got1 != root1:
        raise RootMismatchError(
            f"expected root1 {root1.hex()}, got {got1.hex()} from the consistency proof "
            f"{size1} -> {size2}",
            expected=root1,
            got=got1,
        )
    if got2 != root2:
        raise RootMismatchError(
            f"expected root2 {root2.hex()}, got {got2.hex()} from the consistency proof "
            f"{size1} -> {size2}",
            expected=root2,
            got=got2,
        )
