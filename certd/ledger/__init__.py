"""The certd ledger: RFC 6962 Merkle log, checkpoints, stores, group commit and audit.

Example:
    >>> from certd.ledger import EMPTY_ROOT, Checkpoint
    >>> Checkpoint("certd.example/log", 0, EMPTY_ROOT).to_text().splitlines()[1]
    '0'

Only the pure parts (``merkle``, ``checkpoint``) are re-exported here, so that importing
``certd.ledger`` pulls in nothing heavier than ``cryptography``. Import the stores, the
``Ledger`` and the auditor from their modules: ``certd.ledger.store``,
``certd.ledger.sqlite``, ``certd.ledger.log``, ``certd.ledger.audit``.
"""

from certd.ledger.checkpoint import (
    Checkpoint,
    SignedCheckpoint,
    open_checkpoint,
    open_checkpoint_note,
    sign_checkpoint,
)
from certd.ledger.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    CompactRange,
    NodeFn,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_from_consistency_proof,
    root_from_inclusion_proof,
    root_from_leaf_hashes,
    tree_root,
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
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "open_checkpoint",
    "open_checkpoint_note",
    "root_from_consistency_proof",
    "root_from_inclusion_proof",
    "root_from_leaf_hashes",
    "sign_checkpoint",
    "tree_root",
    "verify_consistency",
    "verify_inclusion",
]
