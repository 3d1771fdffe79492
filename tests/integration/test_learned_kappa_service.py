"""Certify under the learned κ through a real certd (gRPC on loopback, SQLite ledger, keys).

The first certificate of a question fits and records its clusters; later witnesses are
labelled from the record, also after a restart; the task set's config chooses the κ.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from certd.config import CertdConfig
from certd.kappa import ClusterModel, ClusterParams, LearnedKappa
from certd.kappa.learned import EMBED_DIM
from certd.service.server import CertdServer
from forkgate import CertdClient, CertificationRefusedError, InvalidRequestError

THRESHOLD = 0.4
QUESTION = {"domain": "math", "gold": "-2", "question": "The larger root of x^2 + 5x + 6 = 0?"}
OTHER = {"domain": "math", "gold": "-3", "question": "The smaller root of x^2 + 5x + 6 = 0?"}
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


def _rollouts(steps: list[str], gold: str = "-2") -> str:
    """Correct rollouts that open with ``steps`` (distinct texts, so repeats stay repeats)."""
    return json.dumps(
        [f"{s} Check {i}: so the answer is \\boxed{{{gold}}}." for i, s in enumerate(steps)]
    )


def _countdown_rollouts(steps: list[str]) -> str:
    return json.dumps(
        [f"<think>{s}, try {i}</think><answer>(25-5)*4+3</answer>" for i, s in enumerate(steps)]
    )


def _config(data: Path) -> CertdConfig:
    return CertdConfig.model_validate(
        {
            "data_dir": data,
            "listen": "127.0.0.1:0",
            "learned_kappa": {
                "distance_threshold": THRESHOLD,
                "task_sets": [
                    {
                        "name": "algebra",
                        "kappa": "learned",
                        "tasks": [
                            {"math": QUESTION_PB},
                            {"math": {"gold": "x = -3"}},
                            {"math": HOSTILE_PB},
                        ],
                    },
                    {"name": "plain", "kappa": "math.route.v1", "tasks": [{"math": OTHER_PB}]},
                    {
                        "name": "countdown-cal",
                        "kappa": "learned",
                        "distance_threshold": 0.2,
                        "tasks": [{"countdown": COUNTDOWN_PB}],
                    },
                    {
                        "name": "coarse",
                        "kappa": "learned",
                        "distance_threshold": 0.6,
                        "tasks": [{"math": THIRD_PB}],
                    },
                ],
            },
        }
    )


HOSTILE = {
    "domain": "math",
    "gold": "-2.0",  # its own digest (the gold), equal to -2
    "question": "Hostile: the larger root of x^2+5x+6?",
}
THIRD = {"domain": "math", "gold": "x = -2"}  # the digest is over the gold only
COUNTDOWN = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}
COUNTDOWN_PB = {"numbers": [25, 5, 4, 3], "target": 83}
QUESTION_PB = {k: v for k, v in QUESTION.items() if k != "domain"}
THIRD_PB = {k: v for k, v in THIRD.items() if k != "domain"}
HOSTILE_PB = {k: v for k, v in HOSTILE.items() if k != "domain"}
OTHER_PB = {k: v for k, v in OTHER.items() if k != "domain"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("learned") / "certd-data"


@pytest.fixture(scope="module")
def server(data_dir: Path) -> Iterator[CertdServer]:
    srv = CertdServer(_config(data_dir))
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


def test_first_certificate_fits_and_records_the_clusters(
    server: CertdServer, local: LearnedKappa
) -> None:
    kappa = local.name
    label = _predicted(local, FORMULA)
    with _client(server) as c:
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(QUESTION, label, FORMULA, kappa=kappa)  # no steps, nothing recorded
        assert e.value.reason == "CLUSTERS_REQUIRED"
        with pytest.raises(InvalidRequestError):
            c.certify(QUESTION, label, FORMULA, kappa=kappa, fields={"responses": "[1, 2]"})
        with pytest.raises(InvalidRequestError):  # over learned_kappa.max_fit_steps
            c.certify(
                QUESTION, label, FORMULA, kappa=kappa, fields={"responses": _rollouts(["x"] * 257)}
            )
        with pytest.raises(InvalidRequestError) as bad:  # bare steps are no longer trusted
            c.certify(QUESTION, label, FORMULA, kappa=kappa, fields={"steps": json.dumps(STEPS)})
        assert "responses" in str(bad.value)
        # Clusters the client offers are ignored: certd fits the steps itself.
        steps = {"responses": _rollouts(STEPS), "clusters": '{"names": ["k1"]}'}
        cert = c.certify(QUESTION, label, FORMULA, kappa=kappa, fields=steps)
    fields = dict(cert.label.fields)
    assert cert.label.kappa == kappa and cert.label.value == label
    model = ClusterModel.from_json(fields["clusters"], local.params, dim=EMBED_DIM)
    assert model == local.fit_steps(STEPS)  # the server fitted what the client fitted
    assert fields["clusters_digest"] == model.digest
    assert json.loads(fields["clusters_steps"]) == sorted(STEPS)
    # The record is inside the signed statement (the client checked its signature), not
    # only in the reply.
    statement = json.loads(base64.b64decode(json.loads(cert.envelope)["payload"]))
    assert statement["predicate"]["label_fields"]["clusters"] == fields["clusters"]


def test_later_labels_come_from_the_record(server: CertdServer, local: LearnedKappa) -> None:
    kappa = local.name
    first = _predicted(local, FORMULA)
    factor = _predicted(local, FACTOR)
    assert factor != first
    with _client(server) as c:
        # Steps sent with a later request cannot re-cluster the question.
        decoy = {"responses": _rollouts(["Factor: (x+2)(x+3) = 0."] * 8)}
        cert = c.certify(QUESTION, factor, FACTOR, kappa=kappa, fields=decoy)
        fields = dict(cert.label.fields)
        assert "clusters" not in fields
        recorded = ClusterModel.from_json(
            c.get_certificate(ledger_index=int(fields["clusters_index"])).label.fields["clusters"],
            local.params,
            dim=EMBED_DIM,
        )
        assert fields["clusters_digest"] == recorded.digest
        # Anyone holding the record recomputes the label from the witness alone.
        assert local.labels(recorded, [FACTOR]) == [factor]
        # A reworded witness of the same first move is the same family.
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(QUESTION, first, FACTOR_TOO, kappa=kappa)
        assert e.value.reason == "LABEL_MISMATCH" and repr(factor) in str(e.value)
        again = c.certify(QUESTION, factor, FACTOR_TOO, kappa=kappa)
        assert again.certificate_id == cert.certificate_id  # existing: one per family


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
        # A set may choose its own threshold: another κ name, its own clusters.
        coarse = LearnedKappa(local.domain, local.embedder, ClusterParams(distance_threshold=0.6))
        label = coarse.labels(coarse.fit_steps(STEPS), [FACTOR])[0]
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(THIRD, label, FACTOR, kappa=local.name)
        assert e.value.reason == "KAPPA_UNKNOWN"
        cert = c.certify(THIRD, label, FACTOR, fields={"responses": _rollouts(STEPS)})
        assert cert.label.kappa == coarse.name and coarse.name.endswith("upgma-cos0.6")
        # A task in no set keeps the domain default, and no learned κ.
        free = {"domain": "math", "gold": "4"}
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(free, "k1", "Compute 2 + 2 = 4, \\boxed{4}.", kappa=local.name)
        assert e.value.reason == "KAPPA_UNKNOWN"


def test_countdown_under_the_learned_kappa(server: CertdServer, local: LearnedKappa) -> None:
    """The same mechanism on Countdown: the first <think> step is what is clustered."""
    cd = LearnedKappa("countdown", local.embedder, ClusterParams(distance_threshold=0.2))
    steps = ["25-5=20", "25-5=20", "25-3=22", "4*20=80", "4*22=88", "3+80=83", "5*4=20"]
    witness = "<think>25-5=20, 20*4=80, 80+3=83</think><answer>(25-5)*4+3</answer>"
    label = cd.labels(cd.fit_steps(steps), [witness])[0]
    with _client(server) as c:
        cert = c.certify(
            COUNTDOWN, label, witness, fields={"responses": _countdown_rollouts(steps)}
        )
        assert cert.label.kappa == cd.name and cert.label.fields["step"] == "25-5=20"
        tree = c.get_fork_tree(COUNTDOWN)  # the set's κ is the fork tree's default too
        assert tree.kappa == cd.name and [t.label.value for t in tree.certificates] == [label]
        # The gold κ is still served for the same task.
        gold = c.certify(COUNTDOWN, "25,-", witness, kappa="countdown.first-op.v1")
        assert gold.label.kappa == "countdown.first-op.v1"


def test_concurrent_first_requests_share_one_fit(server: CertdServer, local: LearnedKappa) -> None:
    """Two first Certifies with different samples at once: one model is recorded."""
    from concurrent.futures import ThreadPoolExecutor

    task = {"domain": "math", "gold": "x = -3"}  # another question of the set "algebra"
    samples = [STEPS, STEPS[:2] + STEPS[5:] + ["Try x = -3: 9 - 15 + 6 = 0."] * 3]
    witnesses = [FACTOR.replace("-2", "-3"), FORMULA.replace("-2", "-3")]
    fits = [local.fit_steps(s) for s in samples]

    def certify(i: int) -> object:
        label = local.labels(fits[i], [witnesses[i]])[0]
        fields = {"responses": _rollouts(samples[i], gold="-3")}
        with _client(server) as c:
            try:
                return c.certify(task, label, witnesses[i], kappa=local.name, fields=fields)
            except CertificationRefusedError as e:
                return e

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(certify, [0, 1]))
    certs = [o for o in outcomes if not isinstance(o, CertificationRefusedError)]
    refused = [o for o in outcomes if isinstance(o, CertificationRefusedError)]
    assert certs and all(r.reason == "LABEL_MISMATCH" for r in refused), [
        (r.reason, str(r)) for r in refused
    ]
    digests = {c.label.fields["clusters_digest"] for c in certs}  # type: ignore[attr-defined]
    recorded = [json.loads(c.label.fields.get("clusters_steps", "[]")) for c in certs]  # type: ignore[attr-defined]
    assert len(digests) == 1 and digests <= {f.digest for f in fits}, recorded


def test_a_hostile_first_certifier_cannot_shape_the_clusters(
    server: CertdServer, local: LearnedKappa
) -> None:
    """Only the first steps of distinct rollouts that verify CORRECT are clustered: decoy
    steps in wrong rollouts, and one rollout repeated, weigh nothing."""
    decoys = json.loads(_rollouts([f"Decoy move {i}: x = {i} + {i}." for i in range(40)], "7"))
    honest = json.loads(_rollouts(STEPS))
    label = _predicted(local, FORMULA)
    with _client(server) as c:
        few = decoys + honest[:3] * 30  # 3 distinct correct rollouts: under min_fit_steps
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(
                HOSTILE, label, FORMULA, kappa=local.name, fields={"responses": json.dumps(few)}
            )
        assert e.value.reason == "CLUSTERS_UNVERIFIED" and "3 of 43" in str(e.value)
        mixed = decoys + honest + [honest[0]] * 30
        cert = c.certify(
            HOSTILE, label, FORMULA, kappa=local.name, fields={"responses": json.dumps(mixed)}
        )
    fields = dict(cert.label.fields)
    assert json.loads(fields["clusters_steps"]) == sorted(STEPS)
    assert ClusterModel.from_json(fields["clusters"], local.params, dim=EMBED_DIM) == (
        local.fit_steps(STEPS)
    )
    verified = json.dumps(sorted(honest), ensure_ascii=False).encode()
    assert fields["clusters_responses"] == hashlib.sha256(verified).hexdigest()


def test_the_record_survives_a_restart(
    server: CertdServer, data_dir: Path, local: LearnedKappa
) -> None:
    server.stop(grace_s=1.0)
    restarted = CertdServer(_config(data_dir))
    restarted.start()
    try:
        with _client(restarted) as c:
            label = _predicted(local, FACTOR_TOO)
            cert = c.certify(QUESTION, label, FACTOR_TOO, kappa=local.name)  # no steps needed
            assert "clusters_index" in cert.label.fields
    finally:
        restarted.stop(grace_s=1.0)
