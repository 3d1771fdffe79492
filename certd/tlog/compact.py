"""The compact range: the right-edge frontier of an append-only Merkle tree (pure).

Example:
    >>> from certd.tlog.compact import CompactRange
    >>> from certd.tlog.merkle import leaf_hash, root_from_leaf_hashes
    >>> tree = CompactRange()
    >>> _ = tree.extend([leaf_hash(b"a"), leaf_hash(b"b"), leaf_hash(b"c")])
    >>> tree.root() == root_from_leaf_hashes([leaf_hash(d) for d in (b"a", b"b", b"c")])
    True
"""

from __future__ import annotations

from collections.abc import Iterable

from certd.errors import ProofError
from certd.tlog.merkle import EMPTY_ROOT, NodeFn, node_hash
from certd.tlog.proof import check_hash

__all__ = ["CompactRange"]


class CompactRange:
    """The right-edge frontier of a tree: its complete subtrees covering ``[0, size)``.

    The frontier holds one hash per one bit of ``size``, the largest subtree first. It is
    enough to append leaves, to name every complete node an append creates, and to compute
    the root, in O(log n) memory.
    """

    __slots__ = ("_hashes", "_size")

    def __init__(self, size: int = 0, hashes: Iterable[bytes] = ()) -> None:
        """Build a frontier.

        Args:
            size: the number of leaves covered.
            hashes: the frontier hashes, largest subtree first (``frontier_ids(size)``).

        Raises:
            ProofError: the number or length of hashes does not fit ``size``.
        """
        hs = list(hashes)
        if size < 0 or len(hs) != size.bit_count():
            raise ProofError(
                f"expected {max(size, 0).bit_count()} frontier hashes for size {size}, "
                f"got {len(hs)}"
            )
        for h in hs:
            check_hash(h, "frontier hash")
        self._size = size
        self._hashes = hs

    @staticmethod
    def frontier_ids(size: int) -> list[tuple[int, int]]:
        """Name the complete subtrees that make up the frontier of a tree.

        Args:
            size: the tree size.

        Returns:
            ``(level, index)`` pairs, largest subtree first.
        """
        return [
            (level, (size >> level) - 1)
            for level in range(size.bit_length() - 1, -1, -1)
            if size >> level & 1
        ]

    @classmethod
    def from_node_fn(cls, size: int, node_fn: NodeFn) -> CompactRange:
        """Load the frontier of a stored tree.

        Args:
            size: the tree size.
            node_fn: returns complete-subtree hashes.

        Returns:
            The frontier.
        """
        return cls(size, [node_fn(level, index) for level, index in cls.frontier_ids(size)])

    @property
    def size(self) -> int:
        """The number of leaves covered."""
        return self._size

    @property
    def hashes(self) -> tuple[bytes, ...]:
        """The frontier hashes, largest subtree first."""
        return tuple(self._hashes)

    def copy(self) -> CompactRange:
        """Return an independent copy.

        Returns:
            A frontier equal to this one.
        """
        return CompactRange(self._size, self._hashes)

    def append(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        """Append one leaf hash.

        Args:
            leaf: the new leaf's hash (32 bytes).

        Raises:
            ProofError: the hash is not 32 bytes.

        Returns:
            The complete nodes this leaf creates as ``(level, index, hash)``, the leaf
            itself ``(0, size, leaf)`` first, then each parent it completes.
        """
        check_hash(leaf, "leaf hash")
        index = self._size
        created = [(0, index, leaf)]
        h, level = leaf, 0
        while index >> level & 1:
            h = node_hash(self._hashes.pop(), h)
            level += 1
            created.append((level, index >> level, h))
        self._hashes.append(h)
        self._size += 1
        return created

    def append_subtree(self, level: int, root: bytes) -> list[tuple[int, int, bytes]]:
        """Append a complete subtree of ``2**level`` leaves by its root hash.

        The same frontier as appending its leaves one by one; the size must be a multiple
        of ``2**level`` (the subtree is aligned, as every complete node is).

        Raises:
            ProofError: the hash is not 32 bytes, or the size is not aligned.

        Returns:
            The complete nodes created at ``level`` and above, the subtree's root first.
        """
        check_hash(root, "subtree root")
        if level < 0 or self._size & ((1 << level) - 1):
            raise ProofError(
                f"expected a size that is a multiple of 2**{level} to append a subtree, "
                f"got {self._size}"
            )
        index = self._size >> level
        created = [(level, index, root)]
        h = root
        while index & 1:
            h = node_hash(self._hashes.pop(), h)
            level += 1
            index >>= 1
            created.append((level, index, h))
        self._hashes.append(h)
        self._size += 1 << created[0][0]
        return created

    def extend(self, leaves: Iterable[bytes]) -> list[tuple[int, int, bytes]]:
        """Append several leaf hashes.

        Args:
            leaves: the leaf hashes, in order.

        Raises:
            ProofError: a hash is not 32 bytes.

        Returns:
            All complete nodes created, in creation order.
        """
        out: list[tuple[int, int, bytes]] = []
        for leaf in leaves:
            out.extend(self.append(leaf))
        return out

    def root(self) -> bytes:
        """Compute the root of the covered tree.

        Returns:
            The root hash (``EMPTY_ROOT`` for size 0).
        """
        if not self._hashes:
            return EMPTY_ROOT
        h = self._hashes[-1]
        for left in reversed(self._hashes[:-1]):
            h = node_hash(left, h)
        return h
