"""Verification domains: pure code (no I/O, no gRPC, no logging)."""
