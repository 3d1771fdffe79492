"""Witness quorums: accept a checkpoint only when enough independent witnesses cosigned it.

Example::

    from forkgate.witness import witnessed_checkpoint
    note, cp = witnessed_checkpoint(
        ["http://127.0.0.1:8480", "http://127.0.0.1:8481"],
        log_keys=["certd-data/signing.pub"],
        witness_keys=["w1.vkey", "w2.vkey"],
        quorum=2,
    )
    ratchet.witness(note)      # the ratchet then admits only what this checkpoint covers

Each witness (``certd witness``) serves its last cosigned checkpoint at ``/checkpoint``. The
notes of witnesses that cosigned the same checkpoint are merged (their signature lines
joined); the largest checkpoint carrying at least ``quorum`` valid cosignatures (c2sp.org/
tlog-cosignature) by distinct trusted witness keys wins.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path

from certd.errors import CertdError
from certd.signing.dsse import KeyRing
from certd.signing.keys import SIG_TYPE_COSIGNATURE_V1, VerifierKey
from certd.signing.note import add_signature_lines
from certd.tlog import Checkpoint, open_checkpoint_note

from ._base import load_keyring
from .errors import ForkgateError, VerificationError

__all__ = [
    "fetch_cosigned",
    "load_witness_keys",
    "merge_cosigned",
    "open_witnessed",
    "witnessed_checkpoint",
]


def load_witness_keys(keys: Iterable[str | Path | VerifierKey]) -> list[VerifierKey]:
    """Witness cosigner keys from vkey strings, files holding one, or VerifierKeys.

    Args:
        keys: the keys (``certd witness`` prints its ``cosigner_vkey``).

    Raises:
        VerificationError: a key is not a cosigner (type 0x04) vkey.

    Returns:
        The keys.
    """
    out = []
    for k in keys:
        if not isinstance(k, VerifierKey):
            path = Path(k)
            text = path.read_text().strip() if path.is_file() else str(k).strip()
            try:
                k = VerifierKey.from_vkey(text)
            except CertdError as e:
                raise VerificationError(f"witness key {text[:40]!r}: {e}") from e
        if k.sig_type != SIG_TYPE_COSIGNATURE_V1:
            raise VerificationError(f"witness key {k.name}: expected a cosigner (type 0x04) key")
        out.append(k)
    return out


def open_witnessed(
    note: str,
    log_keys: KeyRing | Iterable[str | Path | VerifierKey],
    witness_keys: Iterable[str | Path | VerifierKey],
    quorum: int,
    origin: str | None = None,
) -> Checkpoint:
    """Verify a checkpoint signed by the log and cosigned by at least ``quorum`` witnesses.

    Args:
        note: the checkpoint note with cosignature lines.
        log_keys: the log's trusted keys.
        witness_keys: the trusted witnesses' cosigner keys.
        quorum: how many distinct witnesses must have cosigned.
        origin: the expected log origin, or None for any.

    Raises:
        VerificationError: a signature is bad, or fewer than ``quorum`` witnesses cosigned.

    Returns:
        The checkpoint.
    """
    ring = load_keyring(log_keys)
    assert ring is not None
    witnesses = load_witness_keys(witness_keys)
    try:
        cp, signed = open_checkpoint_note(note, [*(t.key for t in ring), *witnesses], origin)
    except CertdError as e:
        raise VerificationError(f"witnessed checkpoint: {e}") from e
    cosigners = {s.key_id_hex for s in signed.signatures if s.sig_type == SIG_TYPE_COSIGNATURE_V1}
    if len(cosigners) < quorum:
        raise VerificationError(
            f"checkpoint at size {cp.size}: expected cosignatures by at least {quorum} "
            f"trusted witnesses, got {len(cosigners)}"
        )
    return cp


def merge_cosigned(notes: Sequence[str]) -> str:
    """Join the signature lines of notes over the same checkpoint text.

    Args:
        notes: cosigned notes with identical text.

    Raises:
        VerificationError: the notes are over different texts, or malformed.

    Returns:
        One note with every distinct signature line.
    """
    if not notes:
        raise VerificationError("expected at least one note to merge, got none")
    text = notes[0].rsplit("\n\n", 1)[0]
    merged = notes[0]
    try:
        for n in notes[1:]:
            body, _, lines = n.rpartition("\n\n")
            if body != text:
                raise VerificationError("expected notes over the same checkpoint, got different")
            merged = add_signature_lines(merged, [ln for ln in lines.split("\n") if ln])
    except CertdError as e:
        raise VerificationError(f"cannot merge cosigned notes: {e}") from e
    return merged


def fetch_cosigned(url: str, timeout_s: float = 10.0) -> str:
    """Fetch a witness's last cosigned checkpoint (``GET <url>/checkpoint``).

    Args:
        url: the witness's base URL, e.g. ``http://127.0.0.1:8480``.
        timeout_s: the request timeout.

    Raises:
        ForkgateError: the witness cannot be reached or has nothing cosigned.

    Returns:
        The cosigned note.
    """
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/checkpoint", timeout=timeout_s) as r:
            return str(r.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        raise ForkgateError(f"witness {url}: {e}") from e


def witnessed_checkpoint(
    urls: Sequence[str],
    log_keys: KeyRing | Iterable[str | Path | VerifierKey],
    witness_keys: Iterable[str | Path | VerifierKey],
    quorum: int,
    origin: str | None = None,
) -> tuple[str, Checkpoint]:
    """The largest checkpoint that at least ``quorum`` of the witnesses cosigned.

    Unreachable witnesses are skipped (they count against the quorum).

    Args:
        urls: the witnesses' base URLs.
        log_keys: the log's trusted keys.
        witness_keys: the witnesses' cosigner keys.
        quorum: the number of distinct cosignatures required.
        origin: the expected log origin, or None.

    Raises:
        VerificationError: no checkpoint reaches the quorum.

    Returns:
        (the merged note, its checkpoint).
    """
    keys = load_witness_keys(witness_keys)
    ring = load_keyring(log_keys)
    by_text: dict[str, list[str]] = {}
    for url in urls:
        try:
            note = fetch_cosigned(url)
        except ForkgateError:
            continue
        by_text.setdefault(note.rsplit("\n\n", 1)[0], []).append(note)
    best: tuple[str, Checkpoint] | None = None
    for notes in by_text.values():
        merged = merge_cosigned(notes)
        try:
            cp = open_witnessed(merged, ring or [], keys, quorum, origin)
        except VerificationError:
            continue
        if best is None or cp.size > best[1].size:
            best = (merged, cp)
    if best is None:
        raise VerificationError(f"no checkpoint is cosigned by {quorum} of {len(urls)} witnesses")
    return best
