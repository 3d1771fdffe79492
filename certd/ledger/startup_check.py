"""Prove the store before it serves: re-derive its tree from its rows, from a verified mark.

Example:
    >>> import tempfile, pathlib
    >>> from certd.tlog import Checkpoint, sign_checkpoint
    >>> from certd.ledger.store.sqlite import SQLiteStore
    >>> from certd.signing.keys import SigningKey
    >>> key = SigningKey.generate("certd.example/log")
    >>> store = SQLiteStore(":memory:")
    >>> store.append([(None, b"a"), (None, b"b")])
    0
    >>> store.put_checkpoint(2, sign_checkpoint(Checkpoint(key.name, 2, store.root(2)), key))
    >>> mark = pathlib.Path(tempfile.mkdtemp()) / "ledger.verified"
    >>> verifier = verify_store(store, [key.verifier()], key.name, mark)
    >>> verifier.size, verifier.root() == store.root(2)
    (2, True)
    >>> save_mark(mark, key.name, verifier)
    >>> verify_store(store, [key.verifier()], key.name, mark).size  # from the mark
    2

What is checked (``docs/formats.md``, "Start-up check"):

* every row past the mark: each entry is read (missing, or not a BLOB: damage at its
  index), hashed as a leaf, and every complete node the rebuild creates is compared with
  the stored one; the rebuilt root at the latest signed checkpoint's size must be its root;
* the verified prefix: the mark's frontier must give its root, the stored frontier nodes
  must be the mark's, the stored checkpoint at the mark's size must be signed over that
  root, and the row counts and types the backend can survey cheaply must fit the tree; then
  its rows are re-read in one pass (the next chunk read while one is hashed), and the
  digest of each 65,536 entries' bytes and lengths (and of the last partial block) must be
  the mark's (``RowDigests``): an edited row before the mark stops the start, named by its
  index (no node reads, no per-row hashing: a 1M-entry prefix costs about a read of it);
* a store with entries but no signed checkpoint, once a mark exists, is damage.

``StoreVerifier`` is also how the committer gets the root it signs: it reads back the rows
it wrote and recomputes the root from them (``Checkpointer.sign_up_to``).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from hashlib import sha256
from pathlib import Path

from certd.atomicfile import write_atomic
from certd.errors import CertdError, NotFoundError, StoreDamageError
from certd.ledger.store import LedgerStore
from certd.signing.keys import VerifierKey
from certd.tlog import CompactRange, open_checkpoint

__all__ = ["StoreVerifier", "extend_levels", "load_mark", "save_mark", "verify_store"]

_MARK_VERSION = 2
BLOCK = 1 << 16
"""Entries per block digest of the mark (``RowDigests``)."""


def _damage(index: int, message: str) -> StoreDamageError:
    return StoreDamageError(f"entry at {index}: {message}")


class RowDigests:
    """Per ``BLOCK`` entries from entry 0, SHA-256 over their bytes and SHA-256 over their
    lengths (8 bytes each, so no byte can move between rows): the mark keeps these digests
    of the verified prefix, so start-up re-reads it and compares in one pass (no node reads,
    no per-row hashing in Python) and an edited row before the mark stops the start."""

    def __init__(self) -> None:
        self.done: list[bytes] = []
        self._data, self._lengths = sha256(), sha256()
        self.size = 0

    def feed(self, rows: Sequence[bytes]) -> None:
        """Add the next entries' bytes, in order."""
        i = 0
        while i < len(rows):
            part = rows[i : i + BLOCK - self.size % BLOCK]
            self._data.update(b"".join(part))
            self._lengths.update(array("Q", map(len, part)).tobytes())
            self.size += len(part)
            i += len(part)
            if self.size % BLOCK == 0:
                self.done.append(self.tail())
                self._data, self._lengths = sha256(), sha256()

    def tail(self) -> bytes:
        """The digest of the entries past the last complete block."""
        return sha256(self._data.digest() + self._lengths.digest()).digest()


def _prefetched(
    store: LedgerStore, size: int, chunk: int
) -> Iterator[tuple[int, list[bytes | None]]]:
    """``(start, rows)`` chunks of ``[0, size)``, the next read while the caller hashes (the
    SQLite read and large-buffer hashing both release the GIL: two cores, one pass)."""
    with ThreadPoolExecutor(1, thread_name_prefix="certd-startup-read") as pool:
        pending = pool.submit(store.entries_with_gaps, 0, min(size, chunk)) if size else None
        start = 0
        while pending is not None:
            rows = pending.result()
            end = min(size, start + chunk)
            pending = (
                pool.submit(store.entries_with_gaps, end, min(size, end + chunk))
                if end < size
                else None
            )
            yield start, rows
            start = end


class StoreVerifier:
    """The frontier of the rows verified so far; ``advance`` verifies the rows past it."""

    def __init__(
        self, store: LedgerStore, verified: CompactRange, digests: RowDigests | None = None
    ) -> None:
        self._store = store
        self._range = verified
        self._chunk = max(1, store.limits.max_read_entries)
        self.digests = digests if digests is not None else RowDigests()
        if self.digests.size != verified.size:
            raise ValueError(f"row digests of {self.digests.size} entries, verified {self.size}")

    @property
    def size(self) -> int:
        """How many entries are verified."""
        return self._range.size

    @property
    def frontier(self) -> tuple[bytes, ...]:
        """The verified frontier hashes, largest subtree first."""
        return self._range.hashes

    def root(self) -> bytes:
        """The root recomputed from the verified rows."""
        return self._range.root()

    def advance(self, size: int) -> None:
        """Read, hash and check the rows ``[self.size, size)``.

        Raises:
            StoreDamageError: a row is missing, of the wrong type, or a stored node differs
                from the one the rows give (the message names the entry index).
            StoreError: the backend failed.
        """
        if size < self._range.size:
            raise _damage(size, f"asked to verify up to {size}, already at {self.size}")
        while self._range.size < size:
            start = self._range.size
            end = min(size, start + self._chunk)
            rows = self._store.entries_with_gaps(start, end)
            if None in rows:
                raise _damage(start + rows.index(None), "missing, or not a BLOB")
            present = [data for data in rows if data is not None]
            leaves = [sha256(b"\x00" + data).digest() for data in present]
            self.digests.feed(present)
            levels, frontier = extend_levels(self._range, leaves)
            ranges = [(level, lo, lo + len(hashes)) for level, lo, hashes in levels]
            stored = self._store.node_ranges(ranges, within=end)
            for (level, lo, hashes), nodes in zip(levels, stored, strict=True):
                self._compare(level, lo, hashes, nodes)
            self._range = frontier

    @staticmethod
    def _compare(level: int, lo: int, hashes: list[bytes], stored: list[bytes | None]) -> None:
        if stored == hashes:
            return
        offset = next(i for i, (a, b) in enumerate(zip(stored, hashes, strict=True)) if a != b)
        got, index = stored[offset], lo + offset
        what = "missing" if got is None else got.hex()[:16]
        raise _damage(
            index << level,
            f"stored node ({level}, {index}) is {what}, its entries give "
            f"{hashes[offset].hex()[:16]}",
        )


def extend_levels(
    frontier: CompactRange, leaves: list[bytes]
) -> tuple[list[tuple[int, int, list[bytes]]], CompactRange]:
    """Append leaf hashes to a frontier a level at a time (what ``CompactRange.extend`` does
    leaf by leaf, in fewer Python steps).

    Args:
        frontier: the tree so far.
        leaves: the new leaf hashes, in order.

    Returns:
        The complete nodes created, as ``(level, first index, hashes)`` per level from the
        leaves up, and the frontier after them.
    """
    old = dict(
        zip(
            (lv for lv, _ in CompactRange.frontier_ids(frontier.size)), frontier.hashes, strict=True
        )
    )
    levels: list[tuple[int, int, list[bytes]]] = []
    level, lo, current = 0, frontier.size, leaves
    while current:
        levels.append((level, lo, current))
        items, first = (current, lo) if lo % 2 == 0 else ([old[level], *current], lo - 1)
        current = [
            sha256(b"\x01" + items[i] + items[i + 1]).digest() for i in range(0, len(items) - 1, 2)
        ]
        level, lo = level + 1, first >> 1
    size = frontier.size + len(leaves)
    hashes = []
    for lv, index in CompactRange.frontier_ids(size):
        made = levels[lv] if lv < len(levels) else None
        if made is not None and made[1] <= index < made[1] + len(made[2]):
            hashes.append(made[2][index - made[1]])
        else:
            hashes.append(old[lv])
    return levels, CompactRange(size, hashes)


def load_mark(path: Path | None, origin: str) -> tuple[CompactRange, list[bytes], bytes] | None:
    """The verified frontier a mark file records, with its block digests and the digest of
    its last partial block; None when there is none (or a version-1 mark, which has no
    digests: the next start then verifies every row and writes a version-2 mark).

    Raises:
        StoreDamageError: the file is unreadable, malformed, or for another log.
    """
    if path is None or not path.exists():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("version") == 1 and raw.get("origin") == origin:
            return None
        if raw.get("version") != _MARK_VERSION or raw.get("origin") != origin:
            raise ValueError(f"expected version {_MARK_VERSION} and origin {origin!r}")
        size = raw["size"]
        if not isinstance(size, int) or isinstance(size, bool):
            raise ValueError("expected an integer size")
        frontier = CompactRange(size, [bytes.fromhex(h) for h in raw["frontier"]])
        if frontier.root().hex() != raw["root"]:
            raise ValueError("its frontier does not give its root")
        blocks = [bytes.fromhex(h) for h in raw["blocks"]]
        if len(blocks) != size // BLOCK:
            raise ValueError(f"{len(blocks)} block digests for {size} entries")
        tail = bytes.fromhex(raw["tail"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, CertdError) as e:
        raise StoreDamageError(f"the verified-up-to mark {path} is unusable: {e}") from e
    return frontier, blocks, tail


def save_mark(path: Path | None, origin: str, verifier: StoreVerifier) -> None:
    """Record how far the store is verified (atomically; nothing when ``path`` is None)."""
    if path is None:
        return
    body = {
        "version": _MARK_VERSION,
        "origin": origin,
        "size": verifier.size,
        "root": verifier.root().hex(),
        "frontier": [h.hex() for h in verifier.frontier],
        "blocks": [h.hex() for h in verifier.digests.done],
        "tail": verifier.digests.tail().hex(),
    }
    write_atomic(path, (json.dumps(body, sort_keys=True) + "\n").encode("utf-8"))


def _check_prefix(
    store: LedgerStore, verifiers: Sequence[VerifierKey], origin: str, mark: CompactRange
) -> None:
    """Fail unless the verified prefix is still the one the mark and its checkpoint sign."""
    size = mark.size
    if store.size() < size:
        raise _damage(store.size(), f"the store holds {store.size()} entries, {size} were verified")
    for item in store.garbled(size):
        raise StoreDamageError(item)
    stored = store.nodes_at(CompactRange.frontier_ids(size), within=size)
    for (level, index), want, got in zip(
        CompactRange.frontier_ids(size), mark.hashes, stored, strict=True
    ):
        if want != got:
            raise _damage(index << level, f"stored node ({level}, {index}) differs from the mark's")
    try:
        note = store.checkpoint_at(size)
    except NotFoundError as e:
        raise StoreDamageError(
            f"checkpoint at {size}: missing (the store was verified up to size {size} against it)"
        ) from e
    signed = open_checkpoint(note, verifiers, origin=origin)
    if signed.size != size or signed.root_hash != mark.root():
        raise StoreDamageError(f"checkpoint at {size}: not the one the store was verified against")


def _check_rows(store: LedgerStore, size: int, blocks: Sequence[bytes], tail: bytes) -> RowDigests:
    """Re-read the verified prefix's rows and compare their block digests with the mark's.

    Raises:
        StoreDamageError: a row is missing, not a BLOB, or not the one verified (the message
            names its index when its stored leaf node still holds the verified hash).
    """
    digests = RowDigests()
    for start, rows in _prefetched(store, size, max(1, store.limits.max_read_entries)):
        if None in rows:
            raise _damage(start + rows.index(None), "missing, or not a BLOB")
        before = len(digests.done)
        digests.feed([data for data in rows if data is not None])
        for b in range(before, len(digests.done)):
            if digests.done[b] != blocks[b]:
                raise _locate(store, b * BLOCK, (b + 1) * BLOCK)
    if digests.tail() != tail:
        raise _locate(store, len(digests.done) * BLOCK, size)
    return digests


def _locate(store: LedgerStore, lo: int, hi: int) -> StoreDamageError:
    """The damage in ``[lo, hi)``, whose rows' digest is not the verified one: the first row
    whose leaf hash differs from its stored leaf node, else the first stored node the rows
    no longer give (a rebuild from entry 0), else the block."""
    chunk = max(1, store.limits.max_read_entries)
    for start in range(lo, hi, chunk):
        end = min(hi, start + chunk)
        rows = store.entries_with_gaps(start, end)
        stored = store.nodes(0, start, end)
        for i, (data, node) in enumerate(zip(rows, stored, strict=True)):
            if data is not None and sha256(b"\x00" + data).digest() != node:
                return _damage(start + i, "edited: its row is not the one verified")
    try:
        StoreVerifier(store, CompactRange()).advance(hi)
    except StoreDamageError as e:
        return e
    return _damage(lo, f"the rows of [{lo}, {hi}) are not the ones verified")


def verify_store(
    store: LedgerStore,
    verifiers: Sequence[VerifierKey],
    origin: str,
    mark_path: Path | None,
) -> StoreVerifier:
    """Verify the store against its latest signed checkpoint, from the mark on.

    Args:
        store: the store.
        verifiers: keys that may have signed its checkpoints.
        origin: the log's origin line.
        mark_path: the "verified up to" mark, or None to verify every row.

    Raises:
        StoreDamageError: anything the tree does not explain (the message names the index).
        SigningError: the latest stored checkpoint does not verify.
        StoreError: the backend failed.

    Returns:
        A verifier at the store's size (its rows all checked).
    """
    loaded = load_mark(mark_path, origin)
    mark = loaded[0] if loaded is not None else None
    size = store.size()
    digests = None
    if loaded is not None:
        _check_prefix(store, verifiers, origin, loaded[0])
        digests = _check_rows(store, loaded[0].size, loaded[1], loaded[2])
    verifier = StoreVerifier(store, mark if mark is not None else CompactRange(), digests)
    latest = store.latest_checkpoint()
    if latest is None:
        if mark is not None and size > 0:
            raise StoreDamageError(f"checkpoint at {mark.size}: no signed checkpoint is stored")
    else:
        signed = open_checkpoint(latest[1], verifiers, origin=origin)
        if signed.size != latest[0]:
            raise StoreDamageError(
                f"checkpoint at {latest[0]}: the note stored there is for size {signed.size}"
            )
        if signed.size < verifier.size:
            raise StoreDamageError(
                f"checkpoint at {verifier.size}: the latest stored one is at {signed.size}"
            )
        if signed.size > size:
            raise _damage(size, f"missing: the checkpoint at {signed.size} covers it")
        verifier.advance(signed.size)
        if verifier.root() != signed.root_hash:
            raise StoreDamageError(
                f"checkpoint at {signed.size}: signed root {signed.root_hash.hex()[:16]}, "
                f"the entries give {verifier.root().hex()[:16]}"
            )
    verifier.advance(size)
    return verifier
