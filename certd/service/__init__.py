"""The thin gRPC layer: converts messages, calls the authority and the ledger, maps errors."""
