"""The Ledger service: checkpoints, entries, inclusion and consistency proofs."""

from __future__ import annotations

import grpc

from certd.config import CertdConfig
from certd.errors import InvalidInputError, NotFoundError, UnsupportedError
from certd.keyrotation import ROTATION_KEY_PREFIX
from certd.ledger.log import Ledger
from certd.service.convert import proof_to_pb, signed_checkpoint_to_pb
from certd.v1 import ledger_pb2, ledger_pb2_grpc

__all__ = ["LedgerServicer"]


class LedgerServicer(ledger_pb2_grpc.LedgerServicer):
    """Read-only access to the log."""

    def __init__(self, cfg: CertdConfig, ledger: Ledger) -> None:
        self._cfg = cfg
        self._ledger = ledger

    def GetCheckpoint(
        self, request: ledger_pb2.GetCheckpointRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.SignedCheckpoint:
        signed = self._ledger.checkpoint()
        cp = signed.checkpoint
        return signed_checkpoint_to_pb(signed.note, cp.origin, cp.size, cp.root_hash)

    def GetEntries(
        self, request: ledger_pb2.GetEntriesRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.GetEntriesResponse:
        """Entries [start, end); at most max_entries_per_request, fewer near the end of the log."""
        size = self._ledger.size()
        if request.start >= request.end:
            raise InvalidInputError(
                f"range: expected start < end, got [{request.start}, {request.end})", field="start"
            )
        if request.start >= size:
            raise NotFoundError(f"start {request.start} is not below the log size {size}")
        end = min(request.end, size, request.start + self._cfg.limits.max_entries_per_request)
        return ledger_pb2.GetEntriesResponse(entries=self._ledger.entries(request.start, end))

    def GetInclusionProof(
        self, request: ledger_pb2.GetInclusionProofRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.InclusionProof:
        return _inclusion_pb(self._ledger, request.leaf_index, request.tree_size)

    def GetConsistencyProof(
        self, request: ledger_pb2.GetConsistencyProofRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.ConsistencyProof:
        second = request.second_size or self._ledger.checkpoint().checkpoint.size
        if not 0 < request.first_size <= second:
            raise InvalidInputError(
                f"sizes: expected 0 < first_size <= second_size, got {request.first_size}, "
                f"{second}",
                field="first_size",
            )
        if second > self._ledger.size():
            raise NotFoundError(
                f"second_size {second} is beyond the log size {self._ledger.size()}"
            )
        return ledger_pb2.ConsistencyProof(
            first_size=request.first_size,
            second_size=second,
            hashes=self._ledger.consistency_proof(request.first_size, second),
        )

    def GetKeyRotations(
        self, request: ledger_pb2.GetKeyRotationsRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.GetKeyRotationsResponse:
        """Every ``key-rotation/v1`` entry, proven in the checkpoint its outgoing key signed
        last (size R + 1), so a client trusting that key can follow the log."""
        size = self._ledger.checkpoint().checkpoint.size
        indexes = self._ledger.store.keyed(ROTATION_KEY_PREFIX, size)
        if indexes is None:
            raise UnsupportedError("this ledger store cannot list its key rotations")
        entries = self._ledger.store.entries_at(indexes) if indexes else []
        return ledger_pb2.GetKeyRotationsResponse(
            rotations=[
                ledger_pb2.KeyRotation(
                    ledger_index=at, entry=entry, inclusion=_inclusion_pb(self._ledger, at, at + 1)
                )
                for at, entry in zip(indexes, entries, strict=True)
            ]
        )


def _inclusion_pb(ledger: Ledger, index: int, tree_size: int = 0) -> ledger_pb2.InclusionProof:
    """An inclusion proof for ``index`` tied to a signed checkpoint (the latest when size 0).

    Args:
        ledger: the log.
        index: the entry index.
        tree_size: the signed tree size to prove against; 0 for the latest checkpoint.

    Raises:
        NotFoundError: no signed checkpoint covers ``index`` at ``tree_size``.
    """
    signed = ledger.checkpoint() if tree_size == 0 else ledger.checkpoint_at(tree_size)
    cp = signed.checkpoint
    if index >= cp.size:
        raise NotFoundError(f"leaf index {index} is not below tree size {cp.size}")
    entry = ledger.entries(index, index + 1)[0]
    return proof_to_pb(index, entry, signed, ledger.inclusion_proof(index, cp.size))
