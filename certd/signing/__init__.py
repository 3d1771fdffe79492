"""Keys, signed notes, DSSE envelopes and in-toto statements (pure: needs only cryptography).

Example:
    >>> from certd.signing import SigningKey, open_note, sign_note
    >>> key = SigningKey.generate("certd.example/log")
    >>> open_note(sign_note("hi\\n", key), [key.verifier()]).text
    'hi\\n'
"""

from certd.signing.dsse import (
    Envelope,
    EnvelopeSignature,
    KeyRing,
    TrustedKey,
    pae,
    sign_envelope,
    verify_envelope,
)
from certd.signing.intoto import (
    IN_TOTO_PAYLOAD_TYPE,
    STATEMENT_TYPE,
    Statement,
    canonical_json,
    make_statement,
    parse_statement,
    sha256_hex,
    verify_statement_envelope,
)
from certd.signing.keys import (
    SIG_TYPE_COSIGNATURE_V1,
    SIG_TYPE_ED25519,
    SigningKey,
    VerifierKey,
    compute_key_id,
    load_signing_key,
    read_verifier_key,
    save_signing_key,
    validate_key_name,
)
from certd.signing.note import (
    NoteSignature,
    SignedNote,
    add_signature_lines,
    cosign,
    cosignature_message,
    open_note,
    sign_note,
    signature_line,
)

__all__ = [
    "Envelope",
    "EnvelopeSignature",
    "IN_TOTO_PAYLOAD_TYPE",
    "KeyRing",
    "NoteSignature",
    "SIG_TYPE_COSIGNATURE_V1",
    "SIG_TYPE_ED25519",
    "STATEMENT_TYPE",
    "SignedNote",
    "SigningKey",
    "Statement",
    "TrustedKey",
    "VerifierKey",
    "add_signature_lines",
    "canonical_json",
    "compute_key_id",
    "cosign",
    "cosignature_message",
    "load_signing_key",
    "make_statement",
    "open_note",
    "pae",
    "parse_statement",
    "read_verifier_key",
    "save_signing_key",
    "sha256_hex",
    "sign_envelope",
    "sign_note",
    "signature_line",
    "validate_key_name",
    "verify_envelope",
    "verify_statement_envelope",
]
