"""Verdict receipts: one signature over the Merkle root of a batch's verdict digests.

Example:
    >>> from certd.payloads import batch_tree
    >>> root, paths = batch_tree([b"a" * 32, b"b" * 32, b"c" * 32])
    >>> len(root), [len(p) for p in paths]
    (32, [2, 2, 1])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from certd.ledger.log import Ledger
from certd.opening import PREDICATE_VERDICT_RECEIPT
from certd.payloads import batch_tree, receipt_predicate
from certd.signing.dsse import sign_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, make_statement
from certd.signing.keys import SigningKey
from certd.tlog import SignedCheckpoint

__all__ = ["IssuedReceipt", "ReceiptIssuer"]


class ReceiptIssuer:
    """Signs verdict receipts and writes them to the ledger.

    Args:
        ledger: where receipts are logged.
        signer: the log's signing key.
        clock: seconds since the epoch.
    """

    def __init__(self, ledger: Ledger, signer: SigningKey, clock: Callable[[], float]) -> None:
        self._ledger = ledger
        self._signer = signer
        self._clock = clock

    def issue(self, digests: Sequence[bytes], verifiers: Sequence[str]) -> IssuedReceipt:
        """Sign one receipt over a batch of verdict digests and log it.

        Raises:
            LedgerError: the ledger write failed.

        Returns:
            The receipt: root, paths, envelope, its durable ledger index, and its inclusion
            proof in the latest signed checkpoint (which covers it once the write is durable).
        """
        root, paths = batch_tree(digests)
        predicate = receipt_predicate(
            batch_root=root,
            batch_size=len(digests),
            verifiers=verifiers,
            issued_at=int(self._clock()),
        )
        statement = make_statement(
            [("verdict-batch", root.hex())], PREDICATE_VERDICT_RECEIPT, predicate
        )
        envelope = sign_envelope(statement, IN_TOTO_PAYLOAD_TYPE, self._signer).to_json()
        index = self._ledger.submit(None, envelope).result()
        checkpoint, proof = self._ledger.prove(index)
        return IssuedReceipt(root, paths, envelope, index, checkpoint, proof)


@dataclass(frozen=True, slots=True)
class IssuedReceipt:
    """A durable receipt: the batch root and paths, the envelope, where the ledger holds it.

    ``proof`` is the envelope's inclusion proof in ``checkpoint``.
    """

    root: bytes
    paths: list[list[bytes]]
    envelope: bytes
    index: int
    checkpoint: SignedCheckpoint
    proof: list[bytes]
