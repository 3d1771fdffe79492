"""The auditor finds each kind of tampering, and passes and records state on a clean log.

Each test runs twice, over 8-entry chunks (a log of several chunks: the audit starts its
worker processes): the parent reading every entry and sending it to the workers, and the
workers reading their own chunks from the store (``opener``), so complete chunks are checked
by their subtree roots and a tampered one falls back to node-by-node naming.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from certd.errors import LedgerError, NotFoundError
from certd.ledger.audit import AuditReport, AuditState, audit_remote, audit_store
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.signing.dsse import Envelope, EnvelopeSignature, KeyRing, sign_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, make_statement
from certd.signing.keys import SigningKey
from certd.statements import PREDICATE_VERDICT_RECEIPT, receipt_predicate

ORIGIN = "certd.example/log"
KEY = SigningKey(ORIGIN, bytes(range(32)))
RING = KeyRing([KEY.verifier()])


def envelope(i: int, key: SigningKey = KEY) -> bytes:
    root = hashlib.sha256(b"%d" % i).digest()
    predicate = receipt_predicate(batch_root=root, batch_size=1, verifiers=["v"], issued_at=i)
    body = make_statement([("verdict-batch", root.hex())], PREDICATE_VERDICT_RECEIPT, predicate)
    return sign_envelope(body, IN_TOTO_PAYLOAD_TYPE, key).to_json()


def make_log(path: Path, n: int, start: int = 0) -> None:
    with Ledger(SQLiteStore(path), KEY, ORIGIN) as ledger:
        if n:
            ledger.append([(f"k{i}", envelope(i)) for i in range(start, start + n)])


_WORKERS_READ = {"on": False}


@pytest.fixture(autouse=True, params=["parent-reads", "workers-read"])
def _mode(request: pytest.FixtureRequest) -> None:
    _WORKERS_READ["on"] = request.param == "workers-read"


def audit(path: Path, state: Path | None = None, max_faults: int = 1000) -> AuditReport:
    store = SQLiteStore(path)
    workers_read = _WORKERS_READ["on"]
    try:
        return audit_store(
            store,
            RING,
            state,
            origin=ORIGIN,
            workers=2,
            max_faults=max_faults,
            opener=functools.partial(SQLiteStore, str(path)) if workers_read else None,
            chunk_entries=8,
        )
    finally:
        store.close()


def messages(report: AuditReport) -> list[str]:
    return [f.message for f in report.faults]


def tamper(path: Path, sql: str, *args: object) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql, args)
    conn.commit()
    conn.close()


def test_clean_log_passes_and_writes_state(tmp_path: Path) -> None:
    db, state = tmp_path / "l.db", tmp_path / "state.json"
    make_log(db, 40)
    report = audit(db, state)
    assert report.ok, report.summary()
    assert report.checkpoint_size == 40 and report.entries_checked == 40
    assert report.state_updated and report.trusted_before is None
    saved = AuditState.load(state)
    assert saved is not None and saved.size == 40 and saved.origin == ORIGIN
    assert saved.root_hash == report.root_hash
    assert set(json.loads(state.read_text())) == {"origin", "size", "root"}

    with Ledger(SQLiteStore(db), KEY, ORIGIN) as ledger:  # the log grows
        ledger.append([(None, envelope(i)) for i in range(40, 57)])
    again = audit(db, state)
    assert again.ok, again.summary()
    assert again.trusted_before == saved
    loaded = AuditState.load(state)
    assert loaded is not None and loaded.size == 57
    assert "audit OK" in again.summary()


def test_flipped_byte_in_an_entry(tmp_path: Path) -> None:
    db, state = tmp_path / "l.db", tmp_path / "state.json"
    make_log(db, 20)
    assert audit(db, state).ok
    before = state.read_bytes()
    conn = sqlite3.connect(db)
    (data,) = conn.execute("SELECT data FROM entries WHERE idx = 17").fetchone()
    conn.close()
    flipped = bytearray(data)
    flipped[30] ^= 0x01
    tamper(db, "UPDATE entries SET data = ? WHERE idx = 17", bytes(flipped))
    report = audit(db, state)
    assert not report.ok
    got = messages(report)
    assert any(m.startswith("entry 17: stored leaf hash ") and ", recomputed " in m for m in got)
    assert any("checkpoint root mismatch at size 20" in m for m in got)
    assert [f.index for f in report.faults if f.kind == "entry"] == [17]
    assert state.read_bytes() == before  # state is kept when the audit fails
    assert not report.state_updated


def test_deleted_entry(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    make_log(db, 12)
    tamper(db, "DELETE FROM entries WHERE idx = 5")
    report = audit(db)
    assert not report.ok
    assert "entry 5: missing from the log" in messages(report)
    # The stored leaf hash let the rebuild go on: nothing else is wrong.
    assert len(report.faults) == 1


def test_deleted_entry_and_leaf_hash(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    make_log(db, 12)
    tamper(db, "DELETE FROM entries WHERE idx = 5")
    tamper(db, "DELETE FROM nodes WHERE level = 0 AND idx = 5")
    report = audit(db)
    assert not report.ok
    got = messages(report)
    assert "entry 5: no leaf hash either; rebuild stops here" in got
    assert any("cannot recompute the root at size 12" in m for m in got)


def test_forged_and_malformed_signatures(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    attacker = SigningKey.generate("attacker.example/k")
    forged = Envelope.from_json(envelope(3, attacker))
    # Claim the trusted key's id on the attacker's signature.
    claimed = Envelope(
        forged.payload,
        forged.payload_type,
        (EnvelopeSignature(KEY.key_id_hex, forged.signatures[0].sig),),
    )
    with Ledger(SQLiteStore(db), KEY, ORIGIN) as ledger:
        ledger.append([(None, envelope(0)), (None, envelope(1)), (None, envelope(2))])
        ledger.append([(None, claimed.to_json()), (None, b"not an envelope")])
        ledger.append([(None, envelope(5, attacker))])
    report = audit(db)
    assert not report.ok
    got = messages(report)
    assert any(
        m.startswith("entry 3 does not verify as a signed statement (BadSignatureError)")
        and f"does not verify with key {ORIGIN}+{KEY.key_id_hex}" in m
        for m in got
    ), got
    assert any(m.startswith("entry 4 does not verify") and "Malformed" in m for m in got)
    assert any(m.startswith("entry 5") and "UnknownKeyError" in m for m in got)
    assert {f.kind for f in report.faults} == {"signature"}  # the tree itself is fine


def test_rewritten_history_vs_trusted_state(tmp_path: Path) -> None:
    honest, state = tmp_path / "honest.db", tmp_path / "state.json"
    make_log(honest, 10)
    assert audit(honest, state).ok
    trusted = state.read_bytes()
    # A log that signs a different history under the same key and origin.
    forked = tmp_path / "forked.db"
    make_log(forked, 14, start=100)
    report = audit(forked, state)
    assert not report.ok
    got = messages(report)
    assert any(
        m.startswith("inconsistent with trusted checkpoint size 10: trusted root") for m in got
    )
    assert any("consistency proof to size 14 fails" in m for m in got)
    assert state.read_bytes() == trusted


def test_rollback_vs_trusted_state(tmp_path: Path) -> None:
    db, state = tmp_path / "l.db", tmp_path / "state.json"
    make_log(db, 6)
    AuditState(ORIGIN, 9, b"\x01" * 32).save(state)
    report = audit(db, state)
    assert not report.ok
    assert any("has the smaller size 6 (rollback)" in m for m in messages(report))


def test_stored_node_that_disagrees_with_its_children(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    make_log(db, 8)
    tamper(db, "UPDATE nodes SET hash = ? WHERE level = 1 AND idx = 2", b"\x07" * 32)
    report = audit(db)
    assert not report.ok
    got = messages(report)
    assert len(got) == 1 and got[0].startswith("node (1, 2): stored 0707")


def test_bad_state_file_and_checkpoint(tmp_path: Path) -> None:
    db, state = tmp_path / "l.db", tmp_path / "state.json"
    make_log(db, 3)
    state.write_text("{not json")
    report = audit(db, state)
    assert not report.ok
    assert any(m.startswith("trusted state unusable") for m in messages(report))
    other = KeyRing([SigningKey.generate(ORIGIN).verifier()])
    store = SQLiteStore(db)
    bad = audit_store(store, other, None, workers=1)
    store.close()
    assert not bad.ok and bad.checkpoint_size is None
    assert any(m.startswith("latest checkpoint does not verify") for m in messages(bad))
    with pytest.raises(LedgerError):
        AuditState.from_json(b'{"origin": "o", "size": 1, "root": "AAAA"}')


def test_max_faults(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger(SQLiteStore(db), KEY, ORIGIN) as ledger:
        ledger.append([(None, b"junk %d" % i) for i in range(30)])
    report = audit(db, max_faults=5)
    assert len(report.faults) == 5 and report.faults_omitted == 25
    assert "and 25 more" in report.summary()


def test_audit_remote(tmp_path: Path) -> None:
    db, state = tmp_path / "l.db", tmp_path / "state.json"
    make_log(db, 25)
    with Ledger(SQLiteStore(db), KEY, ORIGIN) as ledger:

        def get_checkpoint() -> str:
            return ledger.checkpoint().note

        def get_entries(start: int, end: int) -> list[bytes]:
            return ledger.entries(start, min(end, start + 7))  # the server pages by 7

        report = audit_remote(
            get_checkpoint, get_entries, ledger.consistency_proof, RING, state, origin=ORIGIN
        )
        assert report.ok, report.summary()
        assert report.entries_checked == 25
        ledger.append([(None, envelope(i)) for i in range(25, 31)])
        report2 = audit_remote(
            get_checkpoint, get_entries, ledger.consistency_proof, RING, state, origin=ORIGIN
        )
        assert report2.ok and report2.trusted_before is not None
        assert report2.trusted_before.size == 25

        def lying_proof(s1: int, s2: int) -> list[bytes]:
            return [b"\x00" * 32 for _ in ledger.consistency_proof(s1, s2)]

        def tampered_entries(start: int, end: int) -> list[bytes]:
            page = get_entries(start, end)
            return [envelope(999) if start + i == 3 else e for i, e in enumerate(page)]

        ledger.append([(None, envelope(31))])
        bad = audit_remote(
            get_checkpoint, tampered_entries, lying_proof, RING, state, origin=ORIGIN
        )
        got = messages(bad)
        assert not bad.ok
        assert any("consistency proof to size 32 fails" in m for m in got)
        assert any("checkpoint root mismatch at size 32" in m for m in got)

        def failing_entries(start: int, end: int) -> list[bytes]:
            raise NotFoundError("server says no")

        broken = audit_remote(get_checkpoint, failing_entries, ledger.consistency_proof, RING, None)
        assert not broken.ok
        assert any("cannot fetch entries [0, " in m for m in messages(broken))


def test_first_audit_creates_the_state_directory(tmp_path: Path) -> None:
    db, state = tmp_path / "l.db", tmp_path / "fresh" / "forkgate" / "state.json"
    make_log(db, 4)
    report = audit(db, state)
    assert report.ok, messages(report)
    assert AuditState.load(state).size == 4
