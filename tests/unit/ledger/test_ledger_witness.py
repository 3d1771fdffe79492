"""Witness: cosigns consistent checkpoints in C2SP format, refuses forks, keeps state atomically."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from certd.errors import ConsistencyError, LedgerError, SigningError
from certd.ledger.cosigner import Witness
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.signing.keys import SIG_TYPE_COSIGNATURE_V1, SigningKey
from certd.signing.note import cosignature_message
from certd.tlog import open_checkpoint_note

ORIGIN = "certd.example/log"
LOG_KEY = SigningKey(ORIGIN, bytes(range(32)))
W_KEY = SigningKey("witness.example/w1", bytes(range(1, 33)))


def ledger(entries: list[bytes]) -> Ledger:
    led = Ledger(SQLiteStore(":memory:"), LOG_KEY, ORIGIN)
    if entries:
        led.append([(None, e) for e in entries])
    return led


def witness(tmp_path: Path, clock: float = 1_700_000_000) -> Witness:
    return Witness(
        W_KEY, [LOG_KEY.verifier()], ORIGIN, tmp_path / "state.json", clock=lambda: clock
    )


def test_cosigns_in_c2sp_format_and_persists(tmp_path: Path) -> None:
    log = ledger([b"a", b"b", b"c"])
    w = witness(tmp_path)
    note = w.observe(log.checkpoint().note, log.consistency_proof)
    cp, signed = open_checkpoint_note(note, [LOG_KEY.verifier(), W_KEY.cosigner_verifier()])
    cos = [s for s in signed.signatures if s.sig_type == SIG_TYPE_COSIGNATURE_V1]
    assert cp.size == 3 and len(cos) == 1 and cos[0].timestamp == 1_700_000_000
    # The signature is Ed25519 over "cosignature/v1\ntime <t>\n" + the checkpoint text.
    line = note.rstrip("\n").rsplit("\n", 1)[1]
    blob = base64.b64decode(line.split(" ")[-1])
    assert blob[4:12] == (1_700_000_000).to_bytes(8, "big")
    W_KEY.cosigner_verifier().verify(cosignature_message(cp.to_text(), 1_700_000_000), blob[12:])
    log.append([(None, b"d"), (None, b"e")])
    again = witness(tmp_path)  # reloaded from the state file
    assert again.state is not None and again.state.size == 3
    note = again.observe(log.checkpoint().note, log.consistency_proof)
    assert again.state.size == 5 and witness(tmp_path).state.size == 5  # type: ignore[union-attr]
    log.close()


def test_refuses_a_forked_checkpoint(tmp_path: Path) -> None:
    honest = ledger([b"a", b"b", b"c"])
    w = witness(tmp_path)
    w.observe(honest.checkpoint().note, honest.consistency_proof)
    forked = ledger([b"a", b"X", b"Y", b"Z"])  # same key, another history
    with pytest.raises(ConsistencyError, match="fork: size 4 is not consistent"):
        w.observe(forked.checkpoint().note, forked.consistency_proof)
    same_size = ledger([b"a", b"X", b"Y"])
    with pytest.raises(ConsistencyError, match="two roots at size 3"):
        w.observe(same_size.checkpoint().note, same_size.consistency_proof)
    assert w.state is not None and w.state.size == 3  # nothing recorded
    assert witness(tmp_path).state.size == 3  # type: ignore[union-attr]
    honest.append([(None, b"d")])
    assert w.observe(honest.checkpoint().note, honest.consistency_proof)  # honest goes on
    with pytest.raises(ConsistencyError, match="older"):
        w.observe(same_size.checkpoint().note, same_size.consistency_proof)
    for led in (honest, forked, same_size):
        led.close()


def test_refuses_checkpoints_of_other_logs_and_bad_state(tmp_path: Path) -> None:
    other = SigningKey(ORIGIN, bytes(32))
    led = Ledger(SQLiteStore(":memory:"), other, ORIGIN)
    with pytest.raises(SigningError):
        witness(tmp_path).observe(led.checkpoint().note, led.consistency_proof)
    led.close()
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(LedgerError, match="witness state"):
        witness(tmp_path)
