"""Moved: the certificate index is the ledger's (``certd.ledger.certindex``); re-exported here."""

from certd.ledger.certindex import CertificateIndex, IndexedCertificate, parse_feasibility_entry

__all__ = ["CertificateIndex", "IndexedCertificate", "parse_feasibility_entry"]
