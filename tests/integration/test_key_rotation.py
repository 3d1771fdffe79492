"""Key rotation as a signed log statement, end to end: real servers on 127.0.0.1, real keys.

certd certifies under the old key, ``certd rotate-key`` records the ``key-rotation/v1``
statement, certd restarts on the new key and certifies again: the audit passes and the
client verifies both certificates with the ring that follows the log. An attacker holding
the old key then appends a certificate after the rotation (into the SQLite store, with a
consistent tree and a checkpoint the old key signs): the audit names its index, the client
refuses it, and certd refuses to start on that store.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from google.protobuf import json_format
from server_helpers import LAZY_MATH

from certd.cli import main as certd_main
from certd.config import AccessConfig, CertdConfig
from certd.errors import ConfigError, ConsistencyError, RotatedKeyError
from certd.keyrotation import follow, open_rotation
from certd.ledger.audit import audit_store
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.opening import PREDICATE_TYPES, open_statement
from certd.service.server import CertdServer
from certd.signing.dsse import Envelope, KeyRing, sign_envelope
from certd.signing.keys import SigningKey, load_signing_key, save_signing_key
from certd.statements import verify_certificate
from certd.v1 import authority_pb2
from forkgate import CertdClient
from forkgate.cli import main as forkgate_main

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}


def _certify(cfg: CertdConfig, label: str, witness: str) -> authority_pb2.Certificate:
    server = CertdServer(cfg)
    server.start()
    try:
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            return c.certify(TASK, label, witness)
    finally:
        server.stop(grace_s=1.0)


def _forge_after_rotation(
    data: Path, old: SigningKey, new: SigningKey, like: authority_pb2.Certificate
) -> authority_pb2.Certificate:
    """The old key's holder appends a certificate (a consistent tree, its own checkpoint)."""
    env = Envelope.from_json(like.envelope)
    forged = sign_envelope(env.payload, env.payload_type, old).to_json()
    store = SQLiteStore(data / "ledger.sqlite")
    with Ledger(store, old, like.inclusion.checkpoint.origin, previous_keys=[new.verifier()]) as lg:
        (index,) = lg.append([(None, forged)])
        cp, path = lg.prove(index)
    cert = authority_pb2.Certificate()
    cert.CopyFrom(like)
    cert.envelope, cert.ledger_index = forged, index
    cert.certificate_id = hashlib.sha256(forged).hexdigest()
    cert.inclusion.leaf_index, cert.inclusion.tree_size = index, cp.checkpoint.size
    cert.inclusion.leaf_hash = b""
    del cert.inclusion.hashes[:]
    cert.inclusion.hashes.extend(path)
    cert.inclusion.checkpoint.note = cp.note
    cert.inclusion.checkpoint.size = cp.checkpoint.size
    cert.inclusion.checkpoint.root_hash = cp.checkpoint.root_hash
    return cert


def test_rotation_statement_moves_the_log_and_refuses_the_old_key_after_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    cfg = CertdConfig(data_dir=data, listen="127.0.0.1:0", math=LAZY_MATH)
    before = _certify(cfg, "25,-", "(25-5)*4+3")
    old = load_signing_key(data / "signing.key")
    new = SigningKey.generate(cfg.key_name)
    save_signing_key(tmp_path / "new.key", new)

    # Without the statement, a replica does not start on another key (the attack:
    # listing the real key in previous_log_keys).
    rogue = cfg.model_copy(
        update={"access": AccessConfig(previous_log_keys=[old.verifier().to_vkey()])}
    )
    save_signing_key(data / "signing.key", new)
    with pytest.raises(ConfigError, match="no key-rotation statement"):
        CertdServer(rogue)
    save_signing_key(data / "signing.key", old)

    argv = ["rotate-key", "--data-dir", str(data), "--new-key", str(tmp_path / "new.key")]
    assert certd_main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rot_index = out["rotation_index"]
    assert out["checkpoint_size"] == rot_index + 1 and out["new_key_id"] == new.key_id_hex
    assert load_signing_key(data / "signing.key").key_id_hex == new.key_id_hex
    assert certd_main([*argv[:-1], str(tmp_path / "missing.key")]) == 2
    capsys.readouterr()

    access = AccessConfig(previous_log_keys=[out["previous_log_key"]])
    cfg = cfg.model_copy(update={"access": access})
    after = _certify(cfg, "4,*", "4*(25-3)-5")
    assert after.ledger_index > rot_index

    # The client follows the log from the key it trusts: entry R opens the new key's window.
    store = SQLiteStore(data / "ledger.sqlite")
    try:
        entry = store.entry(rot_index)
        report = audit_store(store, KeyRing([old.verifier(), new.verifier()]), None)
    finally:
        store.close()
    assert report.ok, report.summary()
    rot = open_rotation(entry, KeyRing([old.verifier()]), rot_index)
    ring = follow(KeyRing([old.verifier()]), [rot])
    assert verify_certificate(before, ring).ledger_index < rot_index
    assert verify_certificate(after, ring).ledger_index > rot_index
    # The incoming key before the rotation: refused (its window starts after entry R).
    early = sign_envelope(
        Envelope.from_json(after.envelope).payload, "application/vnd.in-toto+json", new
    )
    with pytest.raises(RotatedKeyError):
        open_statement(early.to_json(), ring, PREDICATE_TYPES, at_index=rot_index - 1)

    forged = _forge_after_rotation(data, old, new, before)
    with pytest.raises(RotatedKeyError, match="rotated"):
        verify_certificate(forged, ring)
    # forkgate's verbs follow the log through the record certd rotate-key wrote.
    trust = ["--trust", old.verifier().to_vkey(), "--trust", out["rotation_record"]]
    for name, cert, code in (("before", before, 0), ("after", after, 0), ("forged", forged, 1)):
        (tmp_path / f"{name}.json").write_text(json.dumps(json_format.MessageToDict(cert)))
        argv = ["check-cert", str(tmp_path / f"{name}.json"), *trust, "--json"]
        assert forkgate_main(argv) == code, name
    assert "RotatedKeyError" in capsys.readouterr().out
    store = SQLiteStore(data / "ledger.sqlite")
    try:
        report = audit_store(store, KeyRing([old.verifier(), new.verifier()]), None)
    finally:
        store.close()
    assert not report.ok
    bad = [f for f in report.faults if f.index == forged.ledger_index]
    assert bad and "RotatedKeyError" in bad[0].message, report.summary()
    assert any(f.kind == "checkpoint" and "RotatedKeyError" in f.message for f in report.faults)
    with pytest.raises(ConsistencyError, match=f"rotated out at entry {rot_index}"):
        CertdServer(cfg)
