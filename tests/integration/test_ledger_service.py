"""Ledger service over real gRPC: checkpoints, entries, proofs, restarts."""

from __future__ import annotations

from pathlib import Path

import pytest
from server_helpers import LAZY_MATH, NO_POOL

from certd import tlog
from certd.config import CertdConfig
from certd.service.server import CertdServer
from certd.signing.keys import VerifierKey
from certd.tlog import open_checkpoint
from forkgate import CertdClient, InvalidRequestError, NotFoundError
from forkgate.puzzles import countdown_puzzles


def _certify_some(c: CertdClient, n: int, seed: int) -> None:
    for p in countdown_puzzles(n, seed=seed):
        lw = c.enumerate_families(p).labels[0]
        c.certify(p, lw.label.value, lw.witness)


def test_entries_and_proofs_verify(address: str, vkey: str) -> None:
    key = VerifierKey.from_vkey(vkey)
    with CertdClient(address) as c:
        _certify_some(c, 5, seed=1)
        first = c.checkpoint()
        _certify_some(c, 5, seed=2)
        second = c.checkpoint()
        cp1 = open_checkpoint(first.note, [key])
        cp2 = open_checkpoint(second.note, [key])
        assert cp2.size > cp1.size
        entries = c.entries(0, cp2.size)
        assert len(entries) == cp2.size
        assert tlog.root_from_leaf_hashes([tlog.leaf_hash(e) for e in entries]) == cp2.root_hash
        for i in range(cp2.size):
            proof = c.inclusion_proof(i)
            assert proof.tree_size == cp2.size
            tlog.verify_inclusion(
                tlog.leaf_hash(entries[i]), i, cp2.size, list(proof.hashes), cp2.root_hash
            )
        cons = c.consistency_proof(cp1.size, cp2.size)
        tlog.verify_consistency(cp1.size, cp2.size, list(cons.hashes), cp1.root_hash, cp2.root_hash)
        with pytest.raises(InvalidRequestError):
            c.consistency_proof(cp2.size, cp1.size)
        with pytest.raises(NotFoundError):
            c.entries(cp2.size + 10, cp2.size + 20)
        with pytest.raises(NotFoundError):
            c.inclusion_proof(cp2.size + 5)


def test_restart_keeps_the_log_and_stays_consistent(tmp_path: Path) -> None:
    cfg = CertdConfig(
        data_dir=tmp_path / "d", listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL
    )
    server = CertdServer(cfg)
    port = server.start()
    vkey = server.key.verifier()
    with CertdClient(f"127.0.0.1:{port}") as c:
        _certify_some(c, 4, seed=5)
        before = open_checkpoint(c.checkpoint().note, [vkey])
    server.stop(grace_s=1)
    server = CertdServer(cfg)
    port = server.start()
    try:
        assert server.key.verifier().to_vkey() == vkey.to_vkey()
        with CertdClient(f"127.0.0.1:{port}") as c:
            p = countdown_puzzles(1, seed=5)[0]
            lw = c.enumerate_families(p).labels[0]
            again = c.certify(p, lw.label.value, lw.witness)
            assert again.ledger_index < before.size  # the certificate from before the restart
            _certify_some(c, 4, seed=6)
            after = open_checkpoint(c.checkpoint().note, [vkey])
            cons = c.consistency_proof(before.size, after.size)
        tlog.verify_consistency(
            before.size, after.size, list(cons.hashes), before.root_hash, after.root_hash
        )
    finally:
        server.stop(grace_s=1)
