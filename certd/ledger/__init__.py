"""The certd ledger: the log over a store, group commit, stores, checkpointer and audit.

Example:
    >>> from certd.ledger.store.sqlite import SQLiteStore
    >>> SQLiteStore(":memory:").size()
    0

The pure log math (Merkle proofs, checkpoints) is ``certd.tlog``; this package is the I/O
around it. Import the stores, the ``Ledger`` and the auditor from their modules:
``certd.ledger.store``, ``certd.ledger.store.sqlite``, ``certd.ledger.log``, ``certd.ledger.audit``.
"""
