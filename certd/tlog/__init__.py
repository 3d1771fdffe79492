"""Transparency-log math: RFC 6962 Merkle trees, proofs and C2SP checkpoints (pure).

Example:
    >>> from certd.tlog import EMPTY_ROOT, Checkpoint
    >>> Checkpoint("certd.example/log", 0, EMPTY_ROOT).to_text().splitlines()[1]
    '0'

Pure functions of bytes that both certd and the client need: no store, no I/O. Importing
``certd.tlog`` pulls in nothing heavier than ``cryptography`` (for checkpoint signatures).

- ``certd.tlog.merkle``: leaf and node hashes, tree roots, building proofs, the RFC reference.
- ``certd.tlog.proof``: verifying inclusion and consistency proofs.
- ``certd.tlog.compact``: the compact range (the right-edge frontier of the tree).
- ``certd.tlog.checkpoint``: the signed tree head (c2sp.org/tlog-checkpoint).
"""

from certd.tlog.checkpoint import (
    Checkpoint,
    SignedCheckpoint,
    open_checkpoint,
    open_checkpoint_note,
    sign_checkpoint,
)
from certd.tlog.compact import CompactRange
from certd.tlog.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    NodeFn,
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
)
from certd.tlog.proof import (
    root_from_consistency_proof,
    root_from_inclusion_proof,
    verify_consistency,
    verify_inclusion,
)

__all__ = [
    "Checkpoint",
    "CompactRange",
    "EMPTY_ROOT",
    "HASH_SIZE",
    "NodeFn",
    "SignedCheckpoint",
    "consistency_proof",
    "consistency_proof_size",
    "inclusion_proof",
    "inclusion_proof_size",
    "leaf_hash",
    "node_hash",
    "open_checkpoint",
    "open_checkpoint_note",
    "reference_consistency_proof",
    "reference_inclusion_proof",
    "root_from_consistency_proof",
    "root_from_inclusion_proof",
    "root_from_leaf_hashes",
    "sign_checkpoint",
    "tree_root",
    "verify_consistency",
    "verify_inclusion",
]
