"""κ no client can shape (issue 30): the operator fits and records the model; Certify applies it.

Attack reproduced: the first Certify of a question used to bring the rollouts its clusters
were fitted on; ten rollouts whose first steps had nothing to do with the question ("Draw a
Venn diagram…", "Note that 17 is prime") but ended in the right boxed answer made ten
clusters and ten certified families, and every honest route later fell into one ``outside``.
Now a Certify never fits: against the operator's model, ten decoy first steps make at most
one family (``outside``), and an honest client's three routes keep three.

Real parts throughout: the packaged MiniLM embedder, the math checker, a SQLite ledger, the
``certd kappa-fit`` code path (``record_models``) and the authority.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from certd.authority.checker import Checkers
from certd.authority.feasibility import Authority
from certd.authority.kappa_models import (
    FitRow,
    checked_from_object,
    record_models,
)
from certd.authority.labeller import LearnedLabeller
from certd.config import CertdConfig
from certd.errors import InvalidInputError
from certd.ledger.audit import audit_store
from certd.ledger.log import Ledger
from certd.ledger.modelkeys import model_key, parse_model_entry
from certd.ledger.store.sqlite import SQLiteStore
from certd.opening import PREDICATE_KAPPA_MODEL, open_statement
from certd.service.convert import checked_task
from certd.signing.dsse import KeyRing
from certd.signing.keys import SigningKey

ORIGIN = "forkgate.test/kappa-operator"
QUESTION = {
    "domain": "math",
    "task": {"gold": "-2", "question": "The larger root of x^2 + 5x + 6 = 0?"},
}
TRUSTED_STEPS = [
    "Apply the quadratic formula: x = (-5 ± sqrt(25 - 24))/2.",
    "By the quadratic formula, x = (-5 ± √(25 − 24)) / 2.",
    "Factor the left side: x^2 + 5x + 6 = (x + 2)(x + 3) = 0.",
    "We factor it as (x + 2)(x + 3) = 0.",
    "Factor the quadratic: (x + 3)(x + 2) = 0.",
    "By Vieta's formulas, r + s = -5 and rs = 6.",
    "Vieta: the roots r, s satisfy r + s = -5 and rs = 6.",
]
ROUTES = [
    "Use the quadratic formula: x = (-5 ± sqrt(5^2 - 4·6)) / 2, so \\boxed{-2}.",
    "Factoring the quadratic: x^2 + 5x + 6 = (x + 3)(x + 2). So \\boxed{-2}.",
    "Vieta's formulas give r + s = -5 and r s = 6, so the roots are -2, -3: \\boxed{-2}.",
]
DECOYS = [
    "Draw a Venn diagram of the sets A and B. The answer is \\boxed{-2}.",
    "Note that 17 is prime. The answer is \\boxed{-2}.",
    "Recall the French Revolution began in 1789. The answer is \\boxed{-2}.",
    "Photosynthesis converts light into chemical energy. The answer is \\boxed{-2}.",
    "Let the train leave the station at noon. The answer is \\boxed{-2}.",
    "Consider a triangle with sides 3, 4 and 5. The answer is \\boxed{-2}.",
    "The mitochondria is the powerhouse of the cell. The answer is \\boxed{-2}.",
    "Shakespeare wrote Hamlet around 1600. The answer is \\boxed{-2}.",
    "Water boils at 100 degrees Celsius at sea level. The answer is \\boxed{-2}.",
    "A cat has four legs and a tail. The answer is \\boxed{-2}.",
]


def _trusted() -> list[str]:
    return [f"{s} Check {i}: so the answer is \\boxed{{-2}}." for i, s in enumerate(TRUSTED_STEPS)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("kappa-operator")
    cfg = CertdConfig.model_validate(
        {
            "data_dir": data,
            "countdown": {"verify_workers": 0},
            "math": {
                "workers": 1,
                "first_step": False,
                "warm_start": False,
                "prime_grammar": False,
            },
            "learned_kappa": {
                "distance_threshold": 0.4,
                "task_sets": [{"name": "algebra", "kappa": "learned", "tasks": [QUESTION]}],
            },
        }
    )
    key = SigningKey.generate(ORIGIN)
    ledger = Ledger(SQLiteStore(data / "ledger.db"), key, ORIGIN)
    checkers = Checkers(cfg)
    labeller = LearnedLabeller.from_config(cfg)
    assert labeller is not None
    authority = Authority(checkers, ledger, key, learned=labeller)
    task = checked_task(checked_from_object(QUESTION, lambda pb: pb), cfg)
    try:
        yield {
            "cfg": cfg,
            "key": key,
            "ledger": ledger,
            "checkers": checkers,
            "labeller": labeller,
            "authority": authority,
            "task": task,
            "kappa": labeller.name_for(task.digest, "math"),
        }
    finally:
        checkers.close()
        ledger.close()


def _verify(checkers: Checkers) -> Any:
    def bind(task: Any) -> Any:
        checker = checkers.for_domain(task.domain)
        return lambda rs: [v.status for v in checker.verify_batch([(task.value, r) for r in rs])]

    return bind


def _fit(s: dict[str, Any], responses: list[str]) -> list[dict[str, Any]]:
    return record_models(
        [FitRow(QUESTION, tuple(responses))],
        labeller=s["labeller"],
        checked=lambda obj: checked_from_object(obj, lambda pb: checked_task(pb, s["cfg"])),
        verify=_verify(s["checkers"]),
        ledger=s["ledger"],
        signer=s["key"],
    )


def _label(s: dict[str, Any], witness: str) -> str:
    return (
        s["labeller"].label(s["task"].digest, "math", s["kappa"], witness, s["ledger"]).family.label
    )


def test_a_certify_never_fits(setup: dict[str, Any]) -> None:
    s = setup
    fields = {"responses": json.dumps(DECOYS)}  # what the first certifier used to bring
    outcome = s["authority"].certify(s["task"], s["kappa"], "k1", DECOYS[0], fields)
    assert outcome.refusal is not None and outcome.refusal.reason == "KAPPA_NOT_FITTED"
    assert "certd kappa-fit" in outcome.refusal.detail
    assert s["ledger"].find(model_key(s["task"].digest, s["kappa"])) is None


def test_the_operator_records_a_signed_model(setup: dict[str, Any]) -> None:
    s = setup
    with pytest.raises(InvalidInputError):  # decoys with wrong answers do not count
        _fit(s, [d.replace("{-2}", "{7}") for d in DECOYS])
    (first,) = _fit(s, _trusted() + [d.replace("{-2}", "{7}") for d in DECOYS])
    assert not first["existing"] and sorted(first["cluster_sizes"]) == [2, 2, 3]
    (again,) = _fit(s, DECOYS)  # a recorded model is kept: labels issued stay valid
    assert again["existing"] and again["ledger_index"] == first["ledger_index"]
    entry = s["ledger"].entry(first["ledger_index"])
    st = open_statement(entry, KeyRing([s["key"].verifier()]), PREDICATE_KAPPA_MODEL)
    p = parse_model_entry(entry)
    assert p is not None and p == st.predicate
    assert p["embedding_model_sha256"] == s["labeller"].model_sha256
    assert p["method"] == "upgma-cos0.4" and p["task_digest"] == s["task"].digest
    assert json.loads(p["steps"]) == sorted(TRUSTED_STEPS)
    # certd audit opens it as a statement certd signs, like every other entry.
    report = audit_store(s["ledger"].store, KeyRing([s["key"].verifier()]), None)
    assert report.ok, report.summary()


def test_decoys_make_at_most_one_family_and_honest_routes_keep_three(
    setup: dict[str, Any],
) -> None:
    s = setup
    if s["ledger"].find(model_key(s["task"].digest, s["kappa"])) is None:
        _fit(s, _trusted())
    labels = {}
    for witness in DECOYS:
        label = _label(s, witness)
        fields = {"responses": json.dumps(DECOYS)}  # ignored
        outcome = s["authority"].certify(s["task"], s["kappa"], label, witness, fields)
        assert outcome.certificate is not None, outcome.refusal
        labels[outcome.certificate.value.index] = label
    assert set(labels.values()) == {"outside"}
    assert len(labels) == 1  # ten decoys, one certificate, one family
    routes = [_label(s, w) for w in ROUTES]
    assert len(set(routes)) == 3 and "outside" not in routes
    for label, witness in zip(routes, ROUTES, strict=True):
        outcome = s["authority"].certify(s["task"], s["kappa"], label, witness)
        assert outcome.certificate is not None and not outcome.existing, outcome.refusal
        fields = outcome.certificate.value.label_fields
        assert fields["clusters_index"] == str(
            s["ledger"].find(model_key(s["task"].digest, s["kappa"]))
        )
        assert "clusters" not in fields  # the model lives in its own statement
    tree = s["authority"].fork_tree(s["task"], s["kappa"])
    assert sorted(c.value.label for c in tree.certificates) == sorted([*routes, "outside"])


def test_a_math_task_in_a_learned_set_needs_its_question(tmp_path: Path) -> None:
    from certd.errors import ConfigError

    cfg = CertdConfig.model_validate(
        {
            "data_dir": tmp_path,
            "learned_kappa": {
                "task_sets": [
                    {
                        "name": "bare",
                        "kappa": "learned",
                        "tasks": [{"domain": "math", "task": {"gold": "5"}}],
                    }
                ]
            },
        }
    )
    with pytest.raises(ConfigError, match="question"):
        LearnedLabeller.from_config(cfg)
