"""Authority service over real gRPC: certificates, the gate, fork trees, enumeration."""

from __future__ import annotations

import threading

import pytest

from certd.domains import countdown as cd
from certd.errors import CertdError
from certd.signing.dsse import KeyRing
from certd.signing.keys import VerifierKey
from certd.statements import verify_certificate
from forkgate import CertdClient, CertificationRefusedError, NotFoundError, make_task
from forkgate.puzzles import countdown_puzzles

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}


def test_certify_then_same_again_returns_existing(address: str, vkey: str) -> None:
    with CertdClient(address, trusted_keys=[vkey]) as c:
        first = c.certify(TASK, "25,-", "(25-5)*4+3")
        again = c.certify(TASK, "25,-", "(25 - 5) * 4 + 3")
    assert first.certificate_id == again.certificate_id
    assert first.ledger_index == again.ledger_index
    claim = verify_certificate(
        first, KeyRing([VerifierKey.from_vkey(vkey)]), task=make_task("countdown", TASK["task"])
    )
    assert (claim.kappa, claim.label) == ("countdown.first-op.v1", "25,-")


@pytest.mark.parametrize(
    ("label", "witness", "reason"),
    [
        ("25,-", "25-5*4+3", "WITNESS_NOT_CORRECT"),
        ("4,*", "(25-5)*4+3", "LABEL_MISMATCH"),
        ("25,-", "(25-5)*4+3+0", "WITNESS_NOT_CORRECT"),
    ],
)
def test_refusals_are_typed(address: str, label: str, witness: str, reason: str) -> None:
    with CertdClient(address) as c, pytest.raises(CertificationRefusedError) as e:
        c.certify(TASK, label, witness)
    assert e.value.reason == reason


def test_pseudo_fork_is_refused(address: str) -> None:
    with CertdClient(address) as c:
        c.certify(TASK, "25,-", "(25-5)*4+3")
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(TASK, "3,+", "3+4*(25-5)")  # same solution, commuted
        assert e.value.reason == "PSEUDO_FORK"
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(TASK, "25,-", "(25-5)*4+3", kappa="countdown.first-op.v9")
        assert e.value.reason == "KAPPA_UNKNOWN"


def test_concurrent_certify_yields_one_certificate(address: str) -> None:
    ids: list[str] = []
    errors: list[Exception] = []

    def worker() -> None:
        try:
            with CertdClient(address) as c:
                ids.append(c.certify(TASK, "4,*", "4*(25-5)+3").certificate_id)
        except (CertdError, CertificationRefusedError) as e:
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(ids) == 8 and len(set(ids)) == 1


def test_certify_batch_of_enumerated_families_and_fork_trees(address: str, vkey: str) -> None:
    puzzles = countdown_puzzles(10, seed=3)
    with CertdClient(address, trusted_keys=[vkey]) as c:
        items, family_count, certifiable = [], {}, {}
        for n, p in enumerate(puzzles):
            fams = c.enumerate_families(p)
            family_count[n] = len(fams.families)
            certifiable[n] = fams.certifiable_families
            for fam in fams.families:
                lw = fams.labels[fam.label_indexes[0]]
                items.append((p, lw.label.value, lw.witness))
        results = c.certify_batch(items)
        refused = [r for r in results if isinstance(r, CertificationRefusedError)]
        assert {r.reason for r in refused} <= {"PSEUDO_FORK"}
        for n, p in enumerate(puzzles):
            tree = c.get_fork_tree(p)
            assert len(tree.certificates) == certifiable[n] <= family_count[n]
        assert len(results) - len(refused) == sum(certifiable.values())
        cert = results[0]
        assert not isinstance(cert, CertificationRefusedError)
        by_id = c.get_certificate(certificate_id=cert.certificate_id)
        by_index = c.get_certificate(ledger_index=cert.ledger_index)
        assert by_id.envelope == by_index.envelope == cert.envelope
        with pytest.raises(NotFoundError):
            c.get_certificate(certificate_id="00" * 32)


def test_enumerate_families_matches_the_domain(address: str) -> None:
    with CertdClient(address) as c:
        got = c.enumerate_families(TASK)
    want = cd.enumerate_families(cd.CountdownTask(numbers=(25, 5, 4, 3), target=83))
    assert [lw.label.value for lw in got.labels] == [
        f"{w.operand},{w.operator}" for w in want.labels
    ]
    assert [list(f.label_indexes) for f in got.families] == [list(f) for f in want.families]
    assert "25,-" in [lw.label.value for lw in got.labels]
