"""Serving proofs: inclusion and consistency proofs within signed tree sizes, nodes cached.

Example:
    >>> from certd.tlog import leaf_hash, verify_inclusion
    >>> from certd.ledger.store.sqlite import SQLiteStore
    >>> store = SQLiteStore(":memory:")
    >>> store.append([(None, b"a"), (None, b"b"), (None, b"c")])
    0
    >>> reader = ProofReader(store, signed_size=lambda: 3)
    >>> path = reader.inclusion_proof(1, 3)
    >>> verify_inclusion(leaf_hash(b"b"), 1, 3, path, store.root(3))

Complete nodes never change once written, so a bounded cache of them is safe for serving (the
committer hands it the nodes each append wrote, so proofs of fresh entries read nothing back);
the integrity checks before signing (``certd.ledger.checkpointer``) read the store directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from certd.errors import NotFoundError
from certd.ledger.store import LedgerStore
from certd.tlog import EMPTY_ROOT, NodeFn, consistency_proof, inclusion_proof

__all__ = ["ProofReader"]

_T = TypeVar("_T")


class ProofReader:
    """Proofs within the signed tree, read through a bounded node cache (thread-safe enough:
    the cache only ever holds correct nodes; a lost update costs a store read)."""

    NODE_CACHE_MAX = 1 << 17

    def __init__(self, store: LedgerStore, signed_size: Callable[[], int]) -> None:
        """Args:
        store: the store the nodes come from.
        signed_size: the size of the latest signed checkpoint (proofs stay within it).
        """
        self._store = store
        self._signed_size = signed_size
        self._cache: dict[tuple[int, int], bytes] = {}

    def cache_nodes(self, nodes: Sequence[tuple[int, int, bytes]]) -> None:
        """Keep the nodes an append wrote: proofs of fresh entries then read nothing back."""
        cache = self._cache
        if len(cache) + len(nodes) > self.NODE_CACHE_MAX:
            cache.clear()
        cache.update(((level, index), h) for level, index, h in nodes)

    def served(self, compute: Callable[[NodeFn], _T], size: int) -> _T:
        """Run a proof computation for serving, its nodes through the cache.

        When the cache holds every node it needs, it runs once; otherwise the nodes missing
        from the cache are fetched in one store call. ``size`` is the signed
        tree size the computation reads within (its nodes are checked against it without a
        read of the store's size).
        """
        cache = self._cache
        try:  # fresh entries: the committer cached every node their proofs read
            return compute(lambda level, index: cache[(level, index)])
        except KeyError:
            pass
        wanted: list[tuple[int, int]] = []

        def record(level: int, index: int) -> bytes:
            if (level, index) not in cache:
                wanted.append((level, index))
            return EMPTY_ROOT

        compute(record)
        table: dict[tuple[int, int], bytes] = {}
        if wanted:
            unique = list(dict.fromkeys(wanted))
            table = dict(zip(unique, self._store.nodes_at(unique, within=size), strict=True))
            if len(cache) + len(table) > self.NODE_CACHE_MAX:
                cache.clear()
            cache.update(table)

        def node(level: int, index: int) -> bytes:
            hit = table.get((level, index))
            return hit if hit is not None else cache[(level, index)]

        return compute(node)

    def _check_signed_size(self, size: int) -> None:
        signed = self._signed_size()
        if not 0 <= size <= signed:
            raise NotFoundError(
                f"expected a tree size within the latest checkpoint (<= {signed}), got {size}"
            )

    def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        """The inclusion proof of an entry in a signed tree size (``Ledger.inclusion_proof``).

        Raises:
            NotFoundError: ``tree_size`` is beyond the latest checkpoint.
            ProofError: ``index`` is not below ``tree_size``.
            StoreError: the store failed.
        """
        self._check_signed_size(tree_size)
        return self.served(lambda node_fn: inclusion_proof(index, tree_size, node_fn), tree_size)

    def inclusion_proof_unchecked(self, index: int, size: int) -> list[bytes]:
        """The inclusion proof in a size the caller took from a signed checkpoint."""
        return self.served(lambda node_fn: inclusion_proof(index, size, node_fn), size)

    def inclusion_proofs_unchecked(self, indexes: Sequence[int], size: int) -> list[list[bytes]]:
        """The inclusion proofs of several entries in a size the caller took from a signed
        checkpoint (the nodes missing from the cache read in one store call)."""
        return self.served(
            lambda node_fn: [inclusion_proof(i, size, node_fn) for i in indexes], size
        )

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        """The consistency proof between two signed tree sizes (``Ledger.consistency_proof``).

        Raises:
            NotFoundError: ``size2`` is beyond the latest checkpoint.
            ProofError: ``size1 > size2`` or a size is negative.
            StoreError: the store failed.
        """
        self._check_signed_size(size2)
        return self.served(lambda node_fn: consistency_proof(size1, size2, node_fn), size2)
