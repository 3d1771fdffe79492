"""Acceptance decisions' ledger keys: built in the ledger package, byte for byte the strings every
existing ledger holds, and the decisions an existing ledger holds are found under them again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from certd.authority.acceptances import Acceptances, TaskSetSpec
from certd.authority.checker import Checkers
from certd.config import AcceptanceConfig, CertdConfig, CountdownConfig, MathConfig
from certd.domains import countdown as cd
from certd.ledger.acceptancekeys import (
    ACCEPTANCE_PREFIX,
    acceptance_key,
    decision_entries,
    refusal_key,
)
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.service.convert import checked_task
from certd.signing.keys import SigningKey
from certd.tlog import leaf_hash, verify_inclusion
from certd.v1 import tasks_pb2
from forkgate.puzzles import countdown_puzzles

ORIGIN = "forkgate.test/acceptance-keys"
DIGEST = "ab" * 32
CFG = CertdConfig(countdown=CountdownConfig(verify_workers=0), math=MathConfig(enabled=False))


def test_the_keys_are_the_strings_existing_ledgers_hold() -> None:
    assert acceptance_key("run-1", 0) == "acceptance/run-1/0"
    assert acceptance_key("r", 12) == "acceptance/r/12"
    assert refusal_key("run-1", "0f" * 16) == "acceptance-refusal/run-1/" + "0f" * 16
    assert ACCEPTANCE_PREFIX == "acceptance"
    assert refusal_key("r", "e").startswith(ACCEPTANCE_PREFIX)


@pytest.fixture()
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    key = SigningKey.generate(ORIGIN)
    with Ledger(SQLiteStore(tmp_path / "ledger.db"), key, ORIGIN) as ledger:
        yield ledger


def test_decisions_written_under_the_old_keys_are_found(ledger: Ledger) -> None:
    ledger.append(
        [
            (None, b"a receipt"),
            ("acceptance/run-1/0", b"accepted"),
            ("feasibility/t/k/25,-", b"a certificate"),
            ("acceptance-refusal/run-1/e1", b"refused"),
        ]
    )
    size = ledger.size()
    assert list(decision_entries(ledger, 0, size)) == [(1, b"accepted"), (3, b"refused")]
    # Past the start (a replica catching up), every entry is read: any may be a decision.
    assert [i for i, _ in decision_entries(ledger, 2, size)] == [2, 3]


def _tasks(n: int) -> tuple[list[tasks_pb2.Task], list[str]]:
    pbs, witnesses = [], []
    for p in countdown_puzzles(n, seed=5):
        countdown = tasks_pb2.CountdownTask(numbers=p["numbers"], target=p["target"])
        pbs.append(tasks_pb2.Task(countdown=countdown))
        found = cd.enumerate_families(cd.CountdownTask(tuple(p["numbers"]), p["target"]))
        witnesses.append(found.labels[0].witness)
    return pbs, witnesses


def test_the_authority_logs_decisions_under_the_ledgers_keys(tmp_path: Path) -> None:
    key = SigningKey.generate(ORIGIN)
    pbs, witnesses = _tasks(8)
    spec = TaskSetSpec("band", k=2, route_kappa="countdown.first-op.v1")
    tasks = [checked_task(pb, CFG) for pb in pbs]
    with Ledger(SQLiteStore(tmp_path / "ledger.db"), key, ORIGIN) as ledger:
        acceptances = Acceptances(Checkers(CFG), ledger, key, AcceptanceConfig())
        acceptances.register(spec, tasks)
        first = acceptances.begin("run-1", "step-0", DIGEST, target="band")
        right = {"band": [[w, w] for w in witnesses]}
        accepted = acceptances.accept(first.evaluation_id, DIGEST, right)
        second = acceptances.begin("run-1", "step-1", DIGEST, target="band")
        wrong = {"band": [["1+1", "1+1"] for _ in witnesses]}
        refused = acceptances.accept(second.evaluation_id, DIGEST, wrong)
        assert accepted.value.accepted and not refused.value.accepted
        assert ledger.find(acceptance_key("run-1", 0)) == accepted.value.index
        assert ledger.find(refusal_key("run-1", second.evaluation_id)) == refused.value.index
        for d in (accepted, refused):  # each decision comes back with its inclusion proof
            cp = d.checkpoint.checkpoint
            entry = leaf_hash(d.value.envelope)
            verify_inclusion(entry, d.value.index, cp.size, d.proof, cp.root_hash)  # or raises
    with Ledger(SQLiteStore(tmp_path / "ledger.db"), key, ORIGIN) as ledger:  # a restart
        again = Acceptances(Checkers(CFG), ledger, key, AcceptanceConfig())
        page = again.decisions("run-1", limit=1)
        assert [d.value.index for d in page.decisions] == [accepted.value.index]
        assert page.next_after == accepted.value.index
        rest = again.decisions("run-1", after=page.next_after, limit=1)
        assert [d.value.index for d in rest.decisions] == [refused.value.index]
        assert rest.next_after is None
