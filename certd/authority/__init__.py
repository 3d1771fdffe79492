"""The certification authority: domain dispatch, the gate, certificates and receipts."""
