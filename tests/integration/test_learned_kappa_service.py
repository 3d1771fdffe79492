"""Certify under the learned κ through a real certd (gRPC on loopback, SQLite ledger, keys).

The operator fits each question's model on trusted rollouts (``certd kappa-fit``) and it is
recorded in the ledger; Certify applies it (also after a restart) and never fits, whatever a
request carries; the task set's config chooses the κ.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from certd.cli import main as certd_main
from certd.config import CertdConfig
from certd.kappa import ClusterParams, LearnedKappa
from certd.service.server import CertdServer
from forkgate import CertdClient, CertificationRefusedError

THRESHOLD = 0.4
QUESTION = {"domain": "math", "gold": "-2", "question": "The larger root of x^2 + 5x + 6 = 0?"}
OTHER = {"domain": "math", "gold": "-3", "question": "The smaller root of x^2 + 5x + 6 = 0?"}
UNFITTED = {"domain": "math", "gold": "x = -3", "question": "Solve for the smaller root."}
STEPS = [
    "Apply the quadratic formula: x = (-5 ± sqrt(25 - 24))/2.",
    "By the quadratic formula, x = (-5 ± √(25 − 24)) / 2.",
    "Factor the left side: x^2 + 5x + 6 = (x + 2)(x + 3) = 0.",
    "We factor it as (x + 2)(x + 3) = 0.",
    "Factor the left side: x^2 + 5x + 6 = (x + 2)(x + 3) = 0.",
    "Complete the square: (x + 5/2)^2 = 25/4 - 6.",
    "Completing the square gives (x + 2.5)^2 = 0.25.",
]
FORMULA = "Let's use the quadratic formula: x = (-5 ± sqrt(5^2 - 4·6)) / 2, so \\boxed{-2}."
FACTOR = "Factoring the quadratic: x^2 + 5x + 6 = (x + 3)(x + 2). So \\boxed{-2}."
FACTOR_TOO = "It factors as (x + 3)(x + 2) = 0, and the larger root is \\boxed{-2}."
CD_STEPS = ["25-5=20", "25-5=20", "25-3=22", "4*20=80", "4*22=88", "3+80=83", "5*4=20"]


def _rollouts(steps: list[str], gold: str = "-2") -> list[str]:
    """Correct rollouts that open with ``steps`` (distinct texts, so repeats stay repeats)."""
    return [f"{s} Check {i}: so the answer is \\boxed{{{gold}}}." for i, s in enumerate(steps)]


def _countdown_rollouts(steps: list[str]) -> list[str]:
    return [f"<think>{s}, try {i}</think><answer>(25-5)*4+3</answer>" for i, s in enumerate(steps)]


def _obj(task: dict[str, object]) -> dict[str, object]:
    return {"domain": task["domain"], "task": {k: v for k, v in task.items() if k != "domain"}}


def _config(data: Path) -> dict[str, object]:
    return {
        "data_dir": str(data),
        "listen": "127.0.0.1:0",
        "learned_kappa": {
            "distance_threshold": THRESHOLD,
            "task_sets": [
                {
                    "name": "algebra",
                    "kappa": "learned",
                    "tasks": [_obj(QUESTION), _obj(UNFITTED)],
                },
                {"name": "plain", "kappa": "math.route.v1", "tasks": [_obj(OTHER)]},
                {
                    "name": "countdown-cal",
                    "kappa": "learned",
                    "distance_threshold": 0.2,
                    "tasks": [_obj(COUNTDOWN)],
                },
                {
                    "name": "coarse",
                    "kappa": "learned",
                    "distance_threshold": 0.6,
                    "tasks": [_obj(THIRD)],
                },
            ],
        },
    }


THIRD = {"domain": "math", "gold": "x = -2", "question": "Its larger root, coarsely?"}
COUNTDOWN = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("learned") / "certd-data"


@pytest.fixture(scope="module")
def config_file(data_dir: Path) -> Path:
    """The config, and every model the operator fits before certd starts (``kappa-fit``)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir.parent / "certd.json"
    path.write_text(json.dumps(_config(data_dir)))
    rows = [
        {"task": _obj(QUESTION), "responses": _rollouts(STEPS)},
        {"task": _obj(THIRD), "responses": _rollouts(STEPS, gold="x = -2")},
        {"task": _obj(COUNTDOWN), "responses": _countdown_rollouts(CD_STEPS)},
    ]
    rollouts = data_dir.parent / "trusted.jsonl"
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["kappa-fit", "--config", str(path), "--rollouts", str(rollouts), "--json"]
    assert certd_main(argv) == 0
    assert certd_main(argv) == 0  # again: every model is kept, nothing refitted
    return path


@pytest.fixture(scope="module")
def server(config_file: Path) -> Iterator[CertdServer]:
    srv = CertdServer(CertdConfig.model_validate_json(config_file.read_text()))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(grace_s=1.0)


@pytest.fixture(scope="module")
def local() -> LearnedKappa:
    """The client's own copy of the κ: the same code and model predict the labels."""
    return LearnedKappa.load("math", ClusterParams(distance_threshold=THRESHOLD))


def _client(srv: CertdServer) -> CertdClient:
    return CertdClient(f"127.0.0.1:{srv.port}", trusted_keys=[str(srv.key.verifier().to_vkey())])


def _predicted(local: LearnedKappa, witness: str) -> str:
    return local.labels(local.fit_steps(STEPS), [witness])[0]


def test_certify_applies_the_operator_model(server: CertdServer, local: LearnedKappa) -> None:
    kappa = local.name
    label = _predicted(local, FORMULA)
    with _client(server) as c:
        # A question the operator did not fit: refused, whatever rollouts the request brings.
        witness = FACTOR.replace("-2", "-3")
        fields = {"responses": json.dumps(_rollouts(STEPS, gold="x = -3"))}
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(UNFITTED, "k1", witness, kappa=kappa, fields=fields)
        assert e.value.reason == "KAPPA_NOT_FITTED" and "kappa-fit" in str(e.value)
        # Clusters or rollouts a client offers are ignored: the recorded model applies.
        offered = {"responses": json.dumps(_rollouts(["x = 1."] * 8)), "clusters": "{}"}
        cert = c.certify(QUESTION, label, FORMULA, kappa=kappa, fields=offered)
    fields = dict(cert.label.fields)
    assert cert.label.kappa == kappa and cert.label.value == label
    assert fields["clusters_digest"] == local.fit_steps(STEPS).digest  # the operator's fit
    assert "clusters" not in fields and "clusters_index" in fields


def test_later_labels_come_from_the_record(server: CertdServer, local: LearnedKappa) -> None:
    kappa = local.name
    first = _predicted(local, FORMULA)
    factor = _predicted(local, FACTOR)
    assert factor != first
    with _client(server) as c:
        cert = c.certify(QUESTION, factor, FACTOR, kappa=kappa)
        assert local.labels(local.fit_steps(STEPS), [FACTOR]) == [factor]
        # A reworded witness of the same first move is the same family.
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(QUESTION, first, FACTOR_TOO, kappa=kappa)
        assert e.value.reason == "LABEL_MISMATCH" and repr(factor) in str(e.value)
        again = c.certify(QUESTION, factor, FACTOR_TOO, kappa=kappa)
        assert again.certificate_id == cert.certificate_id  # existing: one per label
        # A decoy first step is outside every recorded cluster: one label for all of them.
        decoys = [f"Note that {p} is prime. So \\boxed{{-2}}." for p in (17, 19, 23)]
        outside = [c.certify(QUESTION, "outside", d, kappa=kappa) for d in decoys]
        assert len({o.certificate_id for o in outside}) == 1


def test_the_task_sets_config_chooses_the_kappa(server: CertdServer, local: LearnedKappa) -> None:
    with _client(server) as c:
        # No κ named: the set's choice (learned) applies.
        cert = c.certify(QUESTION, _predicted(local, FACTOR), FACTOR)
        assert cert.label.kappa == local.name
        # Another set chose math.route.v1: the learned κ is not served for its task.
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(OTHER, "k1", "Factor it: (x+2)(x+3)=0, \\boxed{-3}.", kappa=local.name)
        assert e.value.reason == "KAPPA_UNKNOWN"
        route = c.certify(OTHER, "step-by-step", "Factor it: (x+2)(x+3)=0, so \\boxed{-3}.")
        assert route.label.kappa == "math.route.v1"
        # A set may choose its own threshold: another κ name, its own model.
        coarse = LearnedKappa(local.domain, local.embedder, ClusterParams(distance_threshold=0.6))
        label = coarse.labels(coarse.fit_steps(STEPS), [FACTOR])[0]
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(THIRD, label, FACTOR, kappa=local.name)
        assert e.value.reason == "KAPPA_UNKNOWN"
        cert = c.certify(THIRD, label, FACTOR.replace("{-2}", "{x = -2}"))
        assert cert.label.kappa == coarse.name and coarse.name.endswith("upgma-cos0.6")
        # A task in no set keeps the domain default, and no learned κ.
        free = {"domain": "math", "gold": "4", "question": "2 + 2?"}
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(free, "k1", "Compute 2 + 2 = 4, \\boxed{4}.", kappa=local.name)
        assert e.value.reason == "KAPPA_UNKNOWN"


def test_countdown_under_the_learned_kappa(server: CertdServer, local: LearnedKappa) -> None:
    """The same mechanism on Countdown: the first <think> step is what is clustered."""
    cd = LearnedKappa("countdown", local.embedder, ClusterParams(distance_threshold=0.2))
    witness = "<think>25-5=20, 20*4=80, 80+3=83</think><answer>(25-5)*4+3</answer>"
    label = cd.labels(cd.fit_steps(CD_STEPS), [witness])[0]
    with _client(server) as c:
        cert = c.certify(COUNTDOWN, label, witness)
        assert cert.label.kappa == cd.name and cert.label.fields["step"] == "25-5=20"
        tree = c.get_fork_tree(COUNTDOWN)  # the set's κ is the fork tree's default too
        assert tree.kappa == cd.name and [t.label.value for t in tree.certificates] == [label]
        # The gold κ is still served for the same task.
        gold = c.certify(COUNTDOWN, "25,-", witness, kappa="countdown.first-op.v1")
        assert gold.label.kappa == "countdown.first-op.v1"


def test_the_record_survives_a_restart(
    server: CertdServer, config_file: Path, local: LearnedKappa
) -> None:
    server.stop(grace_s=1.0)
    restarted = CertdServer(CertdConfig.model_validate_json(config_file.read_text()))
    restarted.start()
    try:
        with _client(restarted) as c:
            label = _predicted(local, FACTOR_TOO)
            cert = c.certify(QUESTION, label, FACTOR_TOO, kappa=local.name)
            assert "clusters_index" in cert.label.fields
    finally:
        restarted.stop(grace_s=1.0)
