"""CertifyBatch hands decided certificates to the ledger a chunk at a time: each is still
verified, signed and durable (committed, covered by a signed checkpoint) before the batch
returns, and comes back with its inclusion proof; a tampered witness is still refused, and the
uniqueness rules hold inside a chunk."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from certd.authority.checker import Checkers
from certd.authority.feasibility import RECORD_CHUNK, Authority, CertifyRequest
from certd.config import CertdConfig, CountdownConfig, MathConfig
from certd.domains import countdown as cd
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.service.convert import checked_task
from certd.signing.dsse import Envelope
from certd.signing.keys import SigningKey
from certd.tlog import leaf_hash, verify_inclusion
from forkgate._base import certify_request
from forkgate.puzzles import countdown_puzzles

ORIGIN = "forkgate.test/certify-batch"
KAPPA = "countdown.first-op.v1"
CFG = CertdConfig(countdown=CountdownConfig(verify_workers=0), math=MathConfig(enabled=False))


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Authority, Ledger, SigningKey, Path]]:
    key = SigningKey.generate(ORIGIN)
    path = tmp_path / "ledger.db"
    ledger = Ledger(SQLiteStore(path, synchronous="FULL"), key, ORIGIN)
    yield Authority(Checkers(CFG), ledger, key), ledger, key, path
    ledger.close()


def requests(n: int) -> list[CertifyRequest]:
    """``n`` distinct certifiable requests (one family per puzzle)."""
    out: list[CertifyRequest] = []
    for p in countdown_puzzles(4 * n, seed=7):
        found = cd.enumerate_families(cd.CountdownTask(tuple(p["numbers"]), p["target"]))
        if not found.families or any(r.task.value.numbers == tuple(p["numbers"]) for r in out):
            continue
        lw = found.labels[found.families[0][0]]
        wire = {"domain": "countdown", "task": {"numbers": p["numbers"], "target": p["target"]}}
        pb = certify_request(wire, f"{lw.operand},{lw.operator}", lw.witness)
        task = checked_task(pb.task, CFG, "task")
        out.append(CertifyRequest(task, KAPPA, pb.label.value, pb.witness))
        if len(out) == n:
            break
    return out


def test_every_certificate_is_durable_and_checkpointed_before_the_batch_returns(
    setup: tuple[Authority, Ledger, SigningKey, Path],
) -> None:
    authority, _, key, path = setup
    reqs = requests(2 * RECORD_CHUNK + 5)
    outcomes = authority.certify_batch(reqs)
    proven = [o.certificate for o in outcomes]
    assert all(p is not None for p in proven)
    certs = [p.value for p in proven if p is not None]
    # Each comes back with its inclusion proof, all in one checkpoint (one ledger call).
    assert len({p.checkpoint.note for p in proven if p is not None}) == 1
    for p in proven:
        assert p is not None
        cp = p.checkpoint.checkpoint
        verify_inclusion(leaf_hash(p.value.envelope), p.value.index, cp.size, p.proof, cp.root_hash)
    # Another connection to the file sees every entry and a checkpoint covering them all: the
    # appends were committed (synchronous=FULL) before the batch returned.
    db = sqlite3.connect(path)
    try:
        for c in certs:
            assert c is not None
            (data,) = db.execute("SELECT data FROM entries WHERE idx = ?", (c.index,)).fetchone()
            assert data == c.envelope
            assert Envelope.from_json(data).signatures[0].keyid == key.key_id_hex
        covered = db.execute("SELECT MAX(size) FROM checkpoints").fetchone()[0]
        commits = db.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
    finally:
        db.close()
    assert covered >= max(c.index for c in certs if c is not None) + 1
    # One group commit per chunk at most (the committer may join chunks), not one per item.
    assert commits <= -(-len(reqs) // RECORD_CHUNK) + 1  # + the empty tree's checkpoint


def test_a_tampered_witness_in_a_chunk_is_refused_and_not_recorded(
    setup: tuple[Authority, Ledger, SigningKey, Path],
) -> None:
    authority, ledger, _, _ = setup
    reqs = requests(10)
    bad = reqs[3]
    reqs[3] = CertifyRequest(bad.task, bad.kappa, bad.label, bad.witness + "+1")
    outcomes = authority.certify_batch(reqs)
    assert outcomes[3].refusal is not None
    assert outcomes[3].refusal.reason == "WITNESS_NOT_CORRECT"
    assert all(o.certificate is not None for i, o in enumerate(outcomes) if i != 3)
    assert ledger.size() == 9
    assert authority.fork_tree(bad.task, KAPPA).certificates == []


def test_repeats_and_pseudo_forks_inside_one_chunk(
    setup: tuple[Authority, Ledger, SigningKey, Path],
) -> None:
    authority, ledger, _, _ = setup
    first = requests(1)[0]
    # The same solution commuted, claimed under the label of its other first operation.
    task = first.task.value
    found = cd.enumerate_families(task)
    canonical = cd.canonical_form(cd.parse_expression(first.witness))
    twins = [
        lw
        for lw in found.labels
        if cd.canonical_form(cd.parse_expression(lw.witness)) == canonical
        and lw.label != first.label
    ]
    batch = [first, first]
    assert twins  # the first puzzle of seed 7 has one
    batch.append(CertifyRequest(first.task, KAPPA, twins[0].label, twins[0].witness))
    outcomes = authority.certify_batch(batch)
    a, b = outcomes[0].certificate, outcomes[1].certificate
    assert a is not None and b is not None and a.value.envelope == b.value.envelope
    assert not outcomes[0].existing and outcomes[1].existing
    assert outcomes[2].refusal is not None and outcomes[2].refusal.reason == "PSEUDO_FORK"
    assert ledger.size() == 1
