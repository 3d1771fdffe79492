"""The ratchet's pure decisions and its state file, against hostile inputs (no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from certd import tlog
from certd.atomicfile import write_atomic
from certd.tlog import Checkpoint
from forkgate.errors import VerificationError
from forkgate.ratchet_state import (
    MissingProof,
    PlanRefused,
    RatchetState,
    TrustedCheckpoint,
    parse_proofs,
    plan,
    proofs_json,
)

ORIGIN = "certd.example/log"
LEAVES = [tlog.leaf_hash(b"entry %d" % i) for i in range(12)]


def cp(size: int, leaves: list[bytes] = LEAVES) -> Checkpoint:
    return Checkpoint(ORIGIN, size, tlog.root_from_leaf_hashes(leaves[:size]))


def proof(a: int, b: int) -> list[bytes]:
    return tlog.consistency_proof(a, b, lambda level, i: _node(level, i))


def _node(level: int, index: int) -> bytes:
    return tlog.root_from_leaf_hashes(LEAVES[index << level : (index + 1) << level])


def trusted(c: Checkpoint) -> TrustedCheckpoint:
    return TrustedCheckpoint(c.size, c.root_hash)


def test_forward_with_a_proof_and_older_ones_known_afterwards() -> None:
    new, known = plan(
        trusted(cp(4)), {}, [cp(9), cp(6)], {(4, 9): proof(4, 9), (6, 9): proof(6, 9)}
    )
    assert new == trusted(cp(9)) and known == {4: cp(4).root_hash, 6: cp(6).root_hash}
    # an old size is now decided from memory, without any proof
    assert plan(new, known, [cp(4)], {}) == (new, known)


def test_missing_proofs_name_the_pair_and_direction() -> None:
    with pytest.raises(MissingProof) as newer:
        plan(trusted(cp(4)), {}, [cp(9)], {})
    assert (newer.value.first, newer.value.second, newer.value.newer) == (4, 9, True)
    with pytest.raises(MissingProof) as older:
        plan(trusted(cp(9)), {}, [cp(4)], {})
    assert (older.value.first, older.value.second, older.value.newer) == (4, 9, False)


def test_forks_and_bad_proofs_are_told_apart() -> None:
    forked = [tlog.leaf_hash(b"other %d" % i) for i in range(12)]
    with pytest.raises(PlanRefused) as fork:  # same size, another root
        plan(trusted(cp(9)), {}, [cp(9, forked)], {})
    assert fork.value.inconsistent
    with pytest.raises(PlanRefused) as known_fork:  # a remembered size, another root
        plan(trusted(cp(9)), {4: cp(4).root_hash}, [cp(4, forked)], {})
    assert known_fork.value.inconsistent
    bent = proof(4, 9)
    bent[0] = bytes(32)
    with pytest.raises(PlanRefused) as mismatch:  # a well-formed proof to another root
        plan(trusted(cp(4)), {}, [cp(9)], {(4, 9): bent})
    assert mismatch.value.inconsistent and "leads to" in str(mismatch.value)
    with pytest.raises(PlanRefused) as short:  # a malformed proof is not evidence of a fork
        plan(trusted(cp(4)), {}, [cp(9)], {(4, 9): proof(4, 9)[:-1]})
    assert not short.value.inconsistent


def test_proofs_round_trip_and_malformed_ones_are_refused() -> None:
    proofs = {(4, 9): proof(4, 9)}
    assert parse_proofs(proofs_json(proofs)) == proofs
    for bad in ("x", [1], [{"first": "4", "second": 9, "hashes": []}], [{"first": 4}]):
        with pytest.raises((ValueError, KeyError)):
            parse_proofs(bad)


def test_state_file_round_trips_and_refuses_another_log_or_garbage(tmp_path: Path) -> None:
    state = RatchetState(
        log="abcd1234@" + ORIGIN,
        trusted=trusted(cp(9)),
        known={4: cp(4).root_hash},
        coverage={"t" * 64: frozenset({"25,-", "3,+"})},
        heads={"run-1": "c" * 64},
    )
    path = tmp_path / "deep" / "ratchet.json"
    state.save(path)
    assert RatchetState.load(path, log=state.log) == state
    with pytest.raises(VerificationError, match="state of log"):
        RatchetState.load(path, log="ffff0000@other.example/log")
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(VerificationError, match="not a state file"):
        RatchetState.load(path)
    assert RatchetState.load(tmp_path / "absent.json") is None


def test_a_failed_atomic_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_atomic(path, b"old")
    with pytest.raises(TypeError):
        write_atomic(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "no" / "dir" / "f", b"x")  # parents only when asked
    write_atomic(tmp_path / "no" / "dir" / "f", b"x", parents=True)
