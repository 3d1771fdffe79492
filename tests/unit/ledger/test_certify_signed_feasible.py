"""The ``feasible`` counts a certificate signs are its task's enumeration counts, whether the
enumeration was served before (EnumerateFamilies) or only counted for the Certify."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_certify_batch_records import CFG, ORIGIN, requests

from certd.authority.checker import Checkers
from certd.authority.feasibility import Authority
from certd.domains import countdown as cd
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.signing.dsse import Envelope
from certd.signing.keys import SigningKey


@pytest.fixture
def authority(tmp_path: Path) -> Iterator[Authority]:
    key = SigningKey.generate(ORIGIN)
    ledger = Ledger(SQLiteStore(tmp_path / "ledger.db", synchronous="FULL"), key, ORIGIN)
    yield Authority(Checkers(CFG), ledger, key)
    ledger.close()


def _signed_feasible(envelope: str) -> Any:
    statement = json.loads(Envelope.from_json(envelope).payload)
    return statement["predicate"]["feasible"]


def test_signed_feasible_is_the_enumeration_counts(authority: Authority) -> None:
    reqs = requests(12)
    for served in reqs[::2]:  # half the tasks enumerated (served) before they are certified
        authority.enumerate(served.task)
    outcomes = authority.certify_batch(reqs)
    for request, outcome in zip(reqs, outcomes, strict=True):
        assert outcome.certificate is not None, outcome.refusal
        found = cd.enumerate_families(request.task.value)
        assert _signed_feasible(outcome.certificate.value.envelope) == {
            "complete": found.complete,
            "families": len(found.families),
            "labels": len({lw.label for lw in found.labels}),
        }
