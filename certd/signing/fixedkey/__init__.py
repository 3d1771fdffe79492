"""Strict Ed25519 verification under one public key known in advance: the C extension
``_ed25519`` (``_ed25519.c`` says how, and what it accepts), which
``certd.signing.ed25519.load_fixed_key_verify`` wraps.

A package of its own, importing nothing, so that importing the extension does not import
``certd.signing`` through the module that wraps it.
"""
