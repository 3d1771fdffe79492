"""A math task is its question with its gold (issue 30): the digest covers the question.

Attack: a question "Solve 2x − 3 = 7 (control)" received the certificates and fork tree of
another question with gold 5, because the digest covered the gold only. Entries signed before
(identity 1) must still verify.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from certd.authority.checker import Checkers
from certd.authority.feasibility import Authority
from certd.config import CertdConfig, CountdownConfig, MathConfig
from certd.errors import InvalidInputError
from certd.ledger.certindex import CertificateIndex
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.payloads import feasibility_predicate
from certd.service.convert import certificate_to_pb, checked_task
from certd.signing.dsse import KeyRing, sign_envelope
from certd.signing.intoto import IN_TOTO_PAYLOAD_TYPE, make_statement
from certd.signing.keys import SigningKey
from certd.statements import (
    PREDICATE_FEASIBILITY,
    task_digest,
    task_digests,
    task_json,
    verify_certificate,
)
from forkgate.tasks import make_task

ORIGIN = "forkgate.test/identity"
CFG = CertdConfig(
    countdown=CountdownConfig(verify_workers=0),
    math=MathConfig(workers=1, first_step=False, warm_start=False),
)
ONE = make_task("math", {"gold": "5", "question": "Solve 2x - 3 = 7."})
CONTROL = make_task("math", {"gold": "5", "question": "Solve 2x − 3 = 7 (control)."})
WITNESS = r"2x = 10, so x = \boxed{5}."


def test_the_question_is_part_of_the_digest() -> None:
    assert task_digest(ONE) != task_digest(CONTROL)
    spaced = make_task("math", {"gold": "5", "question": "  Solve 2x -\n 3\t= 7. "})
    assert task_digest(spaced) == task_digest(ONE)  # whitespace collapsed
    nfd = make_task("math", {"gold": "1", "question": "Cafe\u0301?"})
    nfc = make_task("math", {"gold": "1", "question": "Caf\u00e9?"})
    assert task_digest(nfd) == task_digest(nfc)  # Unicode NFC
    assert task_json(ONE)["task_identity"] == 2
    # Without a question the object (and every old digest) is unchanged.
    bare = make_task("math", {"gold": "5"})
    assert task_json(bare) == {"domain": "math", "gold": "5"}
    assert task_digests(bare) == (task_digest(bare),)
    assert task_digests(ONE)[1] == task_digest(bare)  # what certd signed for it before


@pytest.fixture
def authority(tmp_path: Path) -> Iterator[tuple[Authority, Ledger, SigningKey]]:
    key = SigningKey.generate(ORIGIN)
    ledger = Ledger(SQLiteStore(tmp_path / "ledger.db"), key, ORIGIN)
    checkers = Checkers(CFG)
    yield Authority(checkers, ledger, key), ledger, key
    checkers.close()
    ledger.close()


def test_two_questions_with_one_gold_get_two_certificates(
    authority: tuple[Authority, Ledger, SigningKey],
) -> None:
    auth, _, key = authority
    certs = []
    for task in (ONE, CONTROL):
        checked = checked_task(task, CFG)
        kappa = auth.kappa_for(checked)
        outcome = auth.certify(checked, kappa, _label(auth, checked, kappa), WITNESS)
        assert outcome.certificate is not None and not outcome.existing, outcome.refusal
        certs.append(outcome.certificate)
        tree = auth.fork_tree(checked, kappa)
        assert [c.value.index for c in tree.certificates] == [outcome.certificate.value.index]
    assert certs[0].value.task_digest != certs[1].value.task_digest
    keys = KeyRing([key.verifier()])
    verify_certificate(certificate_to_pb(certs[1]), keys, task=CONTROL)
    with pytest.raises(InvalidInputError):
        verify_certificate(certificate_to_pb(certs[1]), keys, task=ONE)


def _label(auth: Authority, task: object, kappa: str) -> str:
    checker = auth._checkers.for_domain("math")  # the label certd will recompute
    family = checker.verify(task.value, WITNESS, canonical=True).label_for(kappa)  # type: ignore[attr-defined]
    return family.label if family is not None else ""


def test_certify_and_fork_trees_need_a_question(
    authority: tuple[Authority, Ledger, SigningKey],
) -> None:
    auth, _, _ = authority
    bare = checked_task(make_task("math", {"gold": "5"}), CFG)
    kappa = auth.kappa_for(bare)
    for call in (
        lambda: auth.certify(bare, kappa, "x", WITNESS),
        lambda: auth.fork_tree(bare, kappa),
    ):
        with pytest.raises(InvalidInputError) as e:
            call()
        assert e.value.field == "task.math.question" and "question" in str(e.value)


def test_an_identity_1_entry_still_verifies(tmp_path: Path) -> None:
    """A certificate signed before questions were covered (its task object is the gold alone)
    still verifies, also against the task with its question."""
    key = SigningKey.generate(ORIGIN)
    ledger = Ledger(SQLiteStore(tmp_path / "old.db"), key, ORIGIN)
    old = make_task("math", {"gold": "5"})  # what certd signed for ONE before issue 30
    digest = task_digest(old)
    predicate = feasibility_predicate(
        task=old, kappa="math.route.v1", label="step-by-step", label_fields={},
        witness=WITNESS, canonical="", verifier="math@test", issued_at=1,
    )  # fmt: skip
    statement = make_statement(
        [("task", digest), ("witness", str(predicate["witness_digest"]))],
        PREDICATE_FEASIBILITY,
        predicate,
    )
    envelope = sign_envelope(statement, IN_TOTO_PAYLOAD_TYPE, key).to_json()
    ledger.append([(CertificateIndex.key(digest, "math.route.v1", "step-by-step"), envelope)])
    checkers = Checkers(CertdConfig(math=MathConfig(enabled=False)))
    auth = Authority(checkers, ledger, key)  # indexes the old entry at start-up
    try:
        cert = certificate_to_pb(auth.certificate(ledger_index=0))
    finally:
        checkers.close()
        ledger.close()
    keys = KeyRing([key.verifier()])
    assert verify_certificate(cert, keys).task_digest == digest
    assert verify_certificate(cert, keys, task=ONE).task_digest == digest
    with pytest.raises(InvalidInputError):
        verify_certificate(cert, keys, task=make_task("math", {"gold": "6", "question": "?"}))
