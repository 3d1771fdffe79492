"""A retried Certify whose first reply was lost gets its certificate, never PSEUDO_FORK.

The cluster fault test (a replica, then Redis, killed with SIGKILL mid-load) once found a
durable entry no client had been acknowledged: the retry of that item, on a replica whose index
had not yet seen the entry, was refused as a pseudo-fork of its own label. The index gains
entries outside the per-task lock (another request's catch-up), so a catch-up landing between
the claim's two lookups (label, then canonical solution) made the entry look taken by its own
label. Here that interleaving is forced on two replicas sharing one real Redis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from certd.ledger.certificates import CertificateLog, Recorded, Taken
from certd.ledger.certindex import IndexedCertificate, parse_feasibility_entry
from certd.ledger.log import GroupCommitConfig, Ledger
from certd.ledger.store.redis import RedisStore
from certd.opening import PREDICATE_FEASIBILITY
from certd.payloads import feasibility_predicate, task_digest
from certd.signing.dsse import sign_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, make_statement
from certd.signing.keys import SigningKey
from certd.v1 import tasks_pb2

pytest.importorskip("redis")

ORIGIN = "certd.example/retry-race"
KEY = SigningKey(ORIGIN, bytes(range(32)))


def draft(label: str, canonical: str) -> IndexedCertificate:
    """A signed feasibility certificate of one task, as certd drafts it (index -1)."""
    task = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[2, 7, 3], target=100))
    digest = task_digest(task)
    predicate = feasibility_predicate(
        task=task,
        kappa="countdown.first-op.v1",
        label=label,
        label_fields={"op": "+"},
        witness=canonical,
        canonical=canonical,
        verifier="test@1",
        issued_at=1_700_000_000,
        task_sha256=digest,
    )
    statement = make_statement(
        [("task", digest), ("witness", str(predicate["witness_digest"]))],
        PREDICATE_FEASIBILITY,
        predicate,
    )
    envelope = sign_envelope(statement, IN_TOTO_PAYLOAD_TYPE, KEY).to_json()
    cert = parse_feasibility_entry(-1, envelope)
    assert cert is not None
    return cert


def replica(url: str, prefix: str) -> Ledger:
    store = RedisStore(url, prefix=prefix)
    return Ledger(store, KEY, ORIGIN, config=GroupCommitConfig(max_delay_s=0.001))


def catch_up_after_first_lookup(log: CertificateLog, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whichever index lookup the claim makes first, another request's catch-up indexes what
    the other replica appended right after it (the interleaving the cluster test hit)."""
    index = log.index
    fired: list[bool] = []

    def racing(real: Callable[..., Any]) -> Callable[..., Any]:
        def lookup(*args: str) -> Any:
            found = real(*args)
            if not fired:
                fired.append(True)
                index.catch_up(refresh=True)
            return found

        return lookup

    monkeypatch.setattr(index, "get", racing(index.get))
    monkeypatch.setattr(index, "label_for_canonical", racing(index.label_for_canonical))


@pytest.mark.parametrize("other_label", [False, True])
def test_a_retry_on_a_replica_catching_up_meanwhile_gets_its_own_certificate(
    redis_server: object, redis_prefix: str, monkeypatch: pytest.MonkeyPatch, other_label: bool
) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    a, b = replica(url, redis_prefix), replica(url, redis_prefix)
    try:
        log_a = CertificateLog(a)
        log_b = CertificateLog(b, catch_up_interval_s=3600.0)
        log_b.index.catch_up()  # B indexed the empty log and will not catch up on its own
        first = log_a.record(draft("1,+", "1+99")).result(timeout_s=30)
        assert isinstance(first, Recorded) and not first.existing
        catch_up_after_first_lookup(log_b, monkeypatch)
        # The retry of the same item on B; or another label with the same canonical solution.
        again = draft("2,+", "1+99") if other_label else draft("1,+", "1+99")
        got = log_b.record(again).result(timeout_s=30)
        if other_label:
            assert got == Taken("1,+")
        else:
            assert isinstance(got, Recorded), got  # was Taken('1,+'): its own label
            assert got.existing and got.certificate.index == first.certificate.index
            assert got.certificate.envelope == first.certificate.envelope
    finally:
        a.close()
        b.close()
