"""The audit's per-chunk work, run in its worker processes against their own store handle.

A worker opens the store once (``init_worker``), then for each chunk ``[start, end)`` it
reads the entries itself (nothing is sent to it but two integers), opens every entry as a
signed statement, hashes the leaves and, for a complete aligned chunk, rebuilds the chunk's
subtree and compares every node of it with the stored one. It returns the faults, the
signer runs, the key-rotation entries, the leaf hashes (32 bytes an entry) and the chunk's
root when every stored node matched; the parent appends that root to its ``CompactRange``,
or, when anything differs, the leaves one by one through the comparison that names the
first wrong node (``AuditRun.take_chunk``). The checks are those of ``AuditRun.feed``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple, cast

from certd.errors import CertdError, SigningError
from certd.ledger.auditstate import AuditFault
from certd.ledger.store import LedgerStore
from certd.opening import PREDICATE_KEY_ROTATION, PREDICATE_TYPES, open_envelope
from certd.signing.dsse import Envelope, KeyRing
from certd.signing.keys import enable_fast_verify
from certd.tlog import leaf_hash, node_hash

__all__ = [
    "ChunkResult",
    "Signers",
    "audit_chunk",
    "init_worker",
    "subtree_root",
    "verify_signatures",
]

Signers = list[tuple[int, int, frozenset[str]]]
"""Runs of entries ``[start, end)`` whose verified signatures are by the same key ids."""


def verify_signatures(
    start: int, entries: Sequence[bytes | None], trusted: KeyRing
) -> tuple[list[AuditFault], Signers, list[tuple[int, bytes]]]:
    """Open every entry as a statement certd signs (``certd.opening.open_envelope``).

    Returns the faults, the runs of signers (for the key-rotation windows, checked once
    every rotation is known) and the key-rotation entries.
    """
    faults: list[AuditFault] = []
    runs: Signers = []
    rotations: list[tuple[int, bytes]] = []
    for offset, data in enumerate(entries):
        if data is None:
            continue
        index = start + offset
        try:
            env = Envelope.from_json(data)  # parsed once: opened, then its signers read
            st = open_envelope(env, trusted, PREDICATE_TYPES)
            signers = _signers(env, trusted)
        except SigningError as e:
            faults.append(
                AuditFault(
                    "signature",
                    index,
                    f"entry {index} does not verify as a signed statement "
                    f"({type(e).__name__}): {e}",
                )
            )
            continue
        if st.predicate_type == PREDICATE_KEY_ROTATION:
            rotations.append((index, data))
        if runs and runs[-1][1] == index and runs[-1][2] == signers:
            runs[-1] = (runs[-1][0], index + 1, signers)
        else:
            runs.append((index, index + 1, signers))
    return faults, runs, rotations


@functools.lru_cache(maxsize=64)
def _one_signer(keyid: str) -> frozenset[str]:
    return frozenset((keyid,))


def _signers(env: Envelope, trusted: KeyRing) -> frozenset[str]:
    """The key ids whose signatures verify on an envelope that opened (one, but for a
    key rotation's two)."""
    if len(env.signatures) == 1:
        return _one_signer(env.signatures[0].keyid)
    out = set()
    for sig in env.signatures:
        for key in trusted.lookup(sig.keyid):
            try:
                key.verify(env.pae(), sig.sig)
            except SigningError:
                continue
            out.add(sig.keyid)
    return frozenset(out)


class ChunkResult(NamedTuple):
    """What a worker found in ``[start, start + len(leaves))``.

    ``leaves`` is None when an entry of the chunk is missing (the parent then reads the
    chunk itself, gaps and stored leaf hashes included); ``root`` is the chunk's subtree
    root when the chunk is a complete aligned subtree and every stored node of it matched.
    """

    start: int
    leaves: list[bytes] | None
    root: bytes | None
    faults: list[AuditFault]
    signers: Signers
    rotations: list[tuple[int, bytes]]


_worker: dict[str, object] = {}


def init_worker(opener: Callable[[], LedgerStore] | None, trusted: KeyRing) -> None:
    """The pool's initializer: the trusted keys and how to open the store, once a process;
    Ed25519 through a verifier prepared per key (``enable_fast_verify``)."""
    enable_fast_verify()
    _worker.clear()
    _worker.update(opener=opener, trusted=trusted, store=None)


def _store() -> LedgerStore:
    if _worker["store"] is None:
        opener = _worker["opener"]
        assert callable(opener), "audit_chunk needs a pool started with a store opener"
        _worker["store"] = opener()
    return cast(LedgerStore, _worker["store"])


def subtree_root(
    read: Callable[[int, int, int], list[bytes | None]], start: int, leaves: list[bytes]
) -> bytes | None:
    """The root of the complete subtree ``leaves`` (aligned at ``start``), when every one of
    its nodes, leaves included, equals the stored node; None otherwise (or when the chunk
    is not a complete aligned subtree), for the caller to compare node by node."""
    n = len(leaves)
    if n == 0 or n & (n - 1) or start % n:
        return None
    level, nodes = 0, leaves
    while True:
        lo = start >> level
        try:
            if read(level, lo, lo + len(nodes)) != nodes:
                return None
        except CertdError:
            return None
        if len(nodes) == 1:
            return nodes[0]
        nodes = [node_hash(nodes[i], nodes[i + 1]) for i in range(0, len(nodes), 2)]
        level += 1


def audit_chunk(start: int, end: int, verify: bool) -> ChunkResult:
    """Read, verify and hash the entries ``[start, end)`` in a worker (``init_worker``)."""
    store = _store()
    try:
        entries = list(store.entries(start, end))
    except CertdError:
        entries = []
    if len(entries) != end - start:  # some entry is missing: the parent finds which
        return ChunkResult(start, None, None, [], [], [])
    faults: list[AuditFault] = []
    signers: Signers = []
    rotations: list[tuple[int, bytes]] = []
    if verify:
        trusted = _worker["trusted"]
        assert isinstance(trusted, KeyRing)
        faults, signers, rotations = verify_signatures(start, entries, trusted)
    leaves = [leaf_hash(data) for data in entries]
    root = subtree_root(store.nodes, start, leaves)
    return ChunkResult(start, leaves, root, faults, signers, rotations)
