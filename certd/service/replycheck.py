"""Check an idempotent reply stored in the cluster's shared state before replaying it.

Example::

    check = ReplayCheck(ledger.store)
    check("/certd.v1.Authority/CertifyBatch", stored_reply)   # raises unless it checks out

The stored reply is whatever the shared request state (Redis or PostgreSQL) holds under the
idempotency key, so anyone who can write there could plant one. Before a replica replays
it, every certificate or receipt in it (any message with an ``envelope`` and an inclusion
proof) must be the ledger's own entry at the index it names: the entry stored there is
byte-for-byte its envelope, and the inclusion proof is for that index. A reply that does
not parse as the method's response, or names an entry the ledger does not hold, is refused
(``ReplayRefusedError``, gRPC INTERNAL), never served.
"""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from certd.errors import CertdError, LedgerError, StoreError
from certd.ledger.store import LedgerStore

__all__ = ["ReplayCheck", "ReplayRefusedError"]


class ReplayRefusedError(LedgerError):
    """A stored idempotent reply that this replica cannot verify against the ledger."""


def _entries(message: Message) -> Iterator[tuple[int, bytes, int]]:
    """(ledger index, envelope, the inclusion proof's leaf index) of every logged item."""
    names = message.DESCRIPTOR.fields_by_name
    if "envelope" in names and "inclusion" in names and message.HasField("inclusion"):
        got = {
            n: getattr(message, n) for n in ("envelope", "inclusion", "ledger_index") if n in names
        }
        leaf = int(got["inclusion"].leaf_index)
        yield int(got.get("ledger_index", leaf)), bytes(got["envelope"]), leaf
    for field, value in message.ListFields():
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            continue  # scalars, and maps (no logged items in them)
        if isinstance(value, Message):
            yield from _entries(value)
        else:
            for item in value:
                yield from _entries(item)


class ReplayCheck:
    """Verifies stored replies against a ledger store (see the module docstring)."""

    def __init__(self, store: LedgerStore) -> None:
        """Set up.

        Args:
            store: the shared ledger store the replies' entries must be in.
        """
        self._store = store

    def __call__(self, method: str, reply: bytes) -> None:
        """Refuse ``reply`` unless each logged item in it is the ledger's entry.

        Args:
            method: the gRPC method, ``/package.Service/Method``.
            reply: the stored serialized response.

        Raises:
            ReplayRefusedError: the reply does not parse or does not match the ledger.
            StoreError: the store failed (the caller may retry).
        """
        try:
            service, name = method.lstrip("/").rsplit("/", 1)
            desc = descriptor_pool.Default().FindMethodByName(f"{service}.{name}")
            parsed = message_factory.GetMessageClass(desc.output_type).FromString(reply)
        except (KeyError, ValueError, DecodeError) as e:
            raise ReplayRefusedError(
                f"refusing to replay the stored reply of {method}: it does not parse ({e})"
            ) from e
        items = list(_entries(parsed))
        for index, envelope, leaf in items:
            if leaf != index:
                raise ReplayRefusedError(
                    f"refusing to replay the stored reply of {method}: an inclusion proof is "
                    f"for entry {leaf}, the item names entry {index}"
                )
            try:
                stored: bytes | None = self._store.entry(index)
            except StoreError:
                raise
            except CertdError:
                stored = None  # not in the ledger (NotFoundError)
            if stored != envelope:
                raise ReplayRefusedError(
                    f"refusing to replay the stored reply of {method}: entry {index} of the "
                    "ledger is not the envelope it holds"
                )
