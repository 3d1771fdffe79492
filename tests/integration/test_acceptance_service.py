"""Acceptance certificates for real: certd on loopback, two Countdown bands, a scripted policy.

The policy is ``forkgate.jobs.scripted.ScriptedModel``: a callable sampler whose checkpoints differ
in route shares and skill, so the scenarios are exact and fast; the embedded Countdown policy
runs the same flow in test_acceptance_embedded.py. certd draws the prompts, verifies every
sample itself, and decides; nothing in these tests decides correctness on the client side.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from server_helpers import LAZY_MATH, NO_POOL

from certd.config import AcceptanceConfig, CertdConfig, TaskSetConfig
from certd.errors import SigningError
from certd.service.server import CertdServer
from certd.signing.keys import SigningKey
from certd.statements import verify_acceptance
from forkgate import CertdClient, InvalidRequestError, NotFoundError, as_task
from forkgate._base import load_keyring
from forkgate.acceptance import (
    accept,
    begin_acceptance,
    evaluate_checkpoint,
    list_acceptances,
    promote_checkpoint,
    register_task_set,
)
from forkgate.errors import PromotionRefusedError
from forkgate.jobs.scripted import ScriptedCheckpoint, ScriptedModel, blend
from forkgate.puzzles import countdown_puzzles
from forkgate.ratchet import CheckpointRatchet, Reason

U = {"+": 0.3, "-": 0.3, "*": 0.3, "/": 0.1}
SHORTCUT = {"/": 0.9, "+": 0.04, "-": 0.03, "*": 0.03}
CUT = {"band-3": U, "band-4": SHORTCUT}
BANDS = {
    "band-3": countdown_puzzles(32, numbers=3, seed=1, target_range=(10, 200)),
    "band-4": countdown_puzzles(32, numbers=4, seed=2),
}
CKPTS = [
    ScriptedCheckpoint("step-0", {"band-3": U, "band-4": U}, {"band-3": 0.25, "band-4": 0.35}),
    ScriptedCheckpoint("step-100", {"band-3": U, "band-4": U}, {"band-3": 0.45, "band-4": 0.35}),
    # trained further on band-3: band-4's openings collapse onto a route few tasks admit
    ScriptedCheckpoint("step-200", CUT, {"band-3": 0.7, "band-4": 0.3}),
    # recovery (band-4 data mixed back in): its routes and skill restored, band-3 keeps its gain
    ScriptedCheckpoint("step-300", {"band-3": U, "band-4": U}, {"band-3": 0.7, "band-4": 0.5}),
]  # fmt: skip
ROUTE = {"route_kappa": "countdown.first-op.v1", "route_field": "operator"}


def _register(client: CertdClient, tolerance: float = 0.10) -> None:
    for name, tasks in BANDS.items():
        register_task_set(client, name, tasks, k=8, tolerance_best_at_k=tolerance, **ROUTE)


@pytest.fixture()
def client(address: str, vkey: str) -> Any:
    with CertdClient(address, trusted_keys=[vkey]) as c:
        _register(c)
        yield c


@pytest.fixture()
def policy(client: CertdClient) -> ScriptedModel:
    return ScriptedModel.from_certd(client, BANDS)


def _evaluate(
    client: CertdClient, policy: ScriptedModel, ckpt: ScriptedCheckpoint, run: str = "r1"
):
    return evaluate_checkpoint(
        client,
        policy.sampler(ckpt),
        run=run,
        checkpoint=ckpt.name,
        checkpoint_digest=ckpt.digest,
        target="band-3",
    )


def test_a_checkpoint_whose_other_task_eroded_is_refused(
    client: CertdClient, policy: ScriptedModel, vkey: str
) -> None:
    ratchet = CheckpointRatchet(
        [vkey], run="r1", consistency=lambda a, b: client.consistency_proof(a, b).hashes
    )
    claims = []
    for ckpt in CKPTS[:2]:
        claims.append(
            promote_checkpoint(
                client, ratchet, policy.sampler(ckpt), run="r1", checkpoint=ckpt.name,
                checkpoint_digest=ckpt.digest, target="band-3",
            )
        )  # fmt: skip
    assert [c.sequence for c in claims] == [0, 1]
    assert claims[0].predecessor == "" and claims[1].predecessor == claims[0].certificate_id
    assert claims[1].capabilities["band-4"]["change"] is not None

    with pytest.raises(PromotionRefusedError) as refused:
        promote_checkpoint(
            client, ratchet, policy.sampler(CKPTS[2]), run="r1", checkpoint="step-200",
            checkpoint_digest=CKPTS[2].digest, target="band-3",
        )  # fmt: skip
    err = refused.value
    assert err.reason == "CAPABILITY_FELL"
    fell = {(d.task_set, d.metric): d for d in err.drops}  # type: ignore[attr-defined]
    drop = fell[("band-4", "best_at_k")]
    assert drop.drop > 0.10 and drop.previous - drop.now == pytest.approx(drop.drop)
    assert drop.interval.high < 0 and drop.interval.level == pytest.approx(0.95)
    assert "band-4: best_at_k fell" in str(err) and "CI" in str(err)
    assert all(d.task_set == "band-4" for d in err.drops)  # the target improved
    assert ratchet.head == claims[1].certificate_id  # nothing promoted

    claim = promote_checkpoint(
        client, ratchet, policy.sampler(CKPTS[3]), run="r1", checkpoint="step-300",
        checkpoint_digest=CKPTS[3].digest, target="band-3",
    )  # fmt: skip
    assert claim.sequence == 2 and claim.predecessor == claims[1].certificate_id

    decisions = list_acceptances(client, "r1")
    assert [(d.checkpoint, d.accepted) for d in decisions] == [
        ("step-0", True), ("step-100", True), ("step-200", False), ("step-300", True),
    ]  # fmt: skip
    bad = decisions[2]
    assert bad.refusal.reason == "CAPABILITY_FELL"
    # the refusal is signed and logged, but never passes as an acceptance certificate
    record = bad.refusal.record
    assert client.entries(record.ledger_index, record.ledger_index + 1) == [record.envelope]
    with pytest.raises(SigningError, match="predicate type"):
        verify_acceptance(record, load_keyring([vkey]))  # type: ignore[arg-type]
    promotion = CheckpointRatchet([vkey], run="r1").promote(CKPTS[2].digest, record)
    # a statement of another predicate type (the refusal), whatever its signature
    assert not promotion.promoted and promotion.reasons[0][0] is Reason.WRONG_SUBJECT
    b4 = next(f for f in bad.figures if f.task_set == "band-4")
    assert b4.has_previous and b4.ser.estimate > 0.1 and not b4.within_noise
    assert b4.routes["/"] > 0.7
    # every accepted certificate is in the ledger, verifies offline and names its checkpoint
    keys = load_keyring([vkey])
    assert keys is not None
    for d in decisions:
        if d.accepted:
            c = verify_acceptance(d.certificate, keys, checkpoint_digest=d.checkpoint_digest)
            assert client.entries(c.ledger_index, c.ledger_index + 1) == [d.certificate.envelope]
            assert c.seed > 0 and set(c.capabilities) == {"band-3", "band-4"}


def test_the_ratchet_refuses_certificates_that_do_not_fit(
    client: CertdClient, policy: ScriptedModel, vkey: str
) -> None:
    first = _evaluate(client, policy, CKPTS[0])
    second = _evaluate(client, policy, CKPTS[1])
    assert first.accepted and second.accepted

    def reasons(ratchet: CheckpointRatchet, digest: str, cert: Any) -> set[Reason]:
        promotion = ratchet.promote(digest, cert)
        assert not promotion.promoted
        return {r for r, _ in promotion.reasons}

    fresh = lambda **kw: CheckpointRatchet([vkey], run="r1", **kw)  # noqa: E731
    assert reasons(fresh(), CKPTS[1].digest, second.certificate) == {Reason.BROKEN_CHAIN}
    assert reasons(fresh(), CKPTS[1].digest, first.certificate) == {Reason.WRONG_CHECKPOINT}
    assert reasons(CheckpointRatchet([vkey], run="r2"), CKPTS[0].digest, first.certificate) == {
        Reason.WRONG_RUN
    }
    assert reasons(fresh(), CKPTS[0].digest, None) == {Reason.NO_CERTIFICATE}
    other = SigningKey.generate("someone.else/log").verifier().to_vkey()
    assert reasons(CheckpointRatchet([other], run="r1"), CKPTS[0].digest, first.certificate) == {
        Reason.UNKNOWN_KEY
    }
    tampered = type(first.certificate)()
    tampered.CopyFrom(first.certificate)
    tampered.envelope = first.certificate.envelope.replace(b'"payload":"', b'"payload":"AA', 1)
    assert reasons(fresh(), CKPTS[0].digest, tampered) <= {Reason.BAD_SIGNATURE, Reason.MALFORMED}
    unproven = fresh()  # without a consistency proof source, a newer log checkpoint is unproven
    assert unproven.promote(CKPTS[0].digest, first.certificate).promoted
    assert reasons(unproven, CKPTS[1].digest, second.certificate) == {Reason.UNPROVEN_CHECKPOINT}
    chain = fresh(consistency=lambda a, b: client.consistency_proof(a, b).hashes)
    assert chain.promote(CKPTS[0].digest, first.certificate).promoted
    assert chain.promote(CKPTS[1].digest, second.certificate).promoted


def test_target_that_did_not_improve_is_refused(client: CertdClient, policy: ScriptedModel) -> None:
    assert _evaluate(client, policy, CKPTS[1]).accepted
    same = ScriptedCheckpoint("step-101", CKPTS[0].routes, {"band-3": 0.0, "band-4": 0.35})
    reply = _evaluate(client, policy, same)
    assert not reply.accepted and "TARGET_NOT_IMPROVED" in reply.refusal.reason
    assert any(d.metric == "target_pass_at_1" for d in reply.refusal.drops)


def test_evaluations_are_checked(client: CertdClient, policy: ScriptedModel) -> None:
    ck = CKPTS[0]
    with pytest.raises(InvalidRequestError):
        begin_acceptance(client, "r1", ck.name, ck.digest, "no-such-set")
    with pytest.raises(InvalidRequestError):
        begin_acceptance(client, "r1", ck.name, "zz", "band-3")
    challenge = begin_acceptance(client, "r1", ck.name, ck.digest, "band-3")
    assert {s.task_set: len(s.prompts) for s in challenge.sets} == {"band-3": 32, "band-4": 32}
    short = {s.task_set: [["<answer>1</answer>"] * 7 for _ in s.prompts] for s in challenge.sets}
    with pytest.raises(InvalidRequestError, match="expected 8 responses"):
        accept(client, challenge.evaluation_id, ck.digest, short)
    with pytest.raises(NotFoundError):  # an evaluation is used once, even when it failed
        accept(client, challenge.evaluation_id, ck.digest, short)
    challenge = begin_acceptance(client, "r1", ck.name, ck.digest, "band-3")
    full = {s.task_set: [["x"] * 8 for _ in s.prompts] for s in challenge.sets}
    with pytest.raises(InvalidRequestError, match="checkpoint_digest"):
        accept(client, challenge.evaluation_id, "0" * 64, full)
    with pytest.raises(InvalidRequestError):  # another set under a registered name
        register_task_set(client, "band-3", BANDS["band-4"], k=8)
    assert register_task_set(
        client, "band-3", BANDS["band-3"], k=8, tolerance_best_at_k=0.10, **ROUTE
    ).existing


def test_prompts_are_drawn_by_certd_with_a_recorded_seed(client: CertdClient, vkey: str) -> None:
    register_task_set(client, "band-4-draw", BANDS["band-4"], k=2, prompts=5, **ROUTE)
    a = begin_acceptance(client, "r9", "c", "a" * 64, "band-4-draw")
    b = begin_acceptance(client, "r9", "c", "a" * 64, "band-4-draw")

    def drawn(ch):
        return [
            as_task(t).SerializeToString()
            for s in ch.sets
            if s.task_set == "band-4-draw"
            for t in s.prompts
        ]

    assert len(drawn(a)) == 5 and a.seed != b.seed
    samples = {s.task_set: [["<answer>1+1</answer>"] * s.k for _ in s.prompts] for s in a.sets}
    reply = accept(client, a.evaluation_id, "a" * 64, samples)
    assert reply.accepted  # the run's baseline
    keys = load_keyring([vkey])
    assert keys is not None
    claim = verify_acceptance(reply.certificate, keys)
    assert claim.seed == a.seed
    assert len(claim.capabilities["band-4-draw"]["outcomes"]) == 5


def test_the_chain_survives_a_restart(tmp_path: Path) -> None:
    cfg = CertdConfig(
        data_dir=tmp_path / "d",
        listen="127.0.0.1:0",
        acceptance=AcceptanceConfig(
            task_sets=tuple(
                TaskSetConfig(name=n, tasks=tuple({"countdown": t} for t in ts), k=8, **ROUTE)
                for n, ts in BANDS.items()
            )
        ),
        math=LAZY_MATH,
    )
    server = CertdServer(cfg)
    server.start()
    try:
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            policy = ScriptedModel.from_certd(c, BANDS)
            first = _evaluate(c, policy, CKPTS[0])
            assert first.accepted
            worse = ScriptedCheckpoint("step-1", CKPTS[0].routes, {"band-3": 0.0, "band-4": 0.35})
            assert not _evaluate(c, policy, worse).accepted  # the target fell
    finally:
        server.stop(grace_s=1.0)
    server = CertdServer(cfg)
    server.start()
    try:
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            ch = begin_acceptance(c, "r1", "step-100", CKPTS[1].digest, "band-3")
            assert ch.predecessor == first.certificate.certificate_id
            decisions = list_acceptances(c, "r1")
            assert [d.accepted for d in decisions] == [True, False]
            assert decisions[1].refusal.reason == "TARGET_NOT_IMPROVED"
            assert decisions[1].refusal.drops[0].metric == "target_pass_at_1"
    finally:
        server.stop(grace_s=1.0)


def test_small_falls_cannot_add_up_unseen(address: str, vkey: str) -> None:
    """Each step keeps band-4's pass@1 within tolerance of the previous certificate, but not
    of the run's baseline: the refusal says it fell since the baseline."""
    with CertdClient(address, trusted_keys=[vkey]) as c:
        _register(c, tolerance=0.15)
        policy = ScriptedModel.from_certd(c, BANDS)
        replies = []
        for i, drift in enumerate([0.0, 0.3, 0.6]):
            ckpt = ScriptedCheckpoint(
                f"g-{i}",
                {"band-3": U, "band-4": blend(U, SHORTCUT, drift)},
                {"band-3": 0.25 + 0.15 * i, "band-4": 0.35},
            )
            replies.append(_evaluate(c, policy, ckpt, run="gradual"))
    assert [r.accepted for r in replies] == [True, True, False]
    drops = {(d.metric, d.against): d for d in replies[2].refusal.drops}
    since_base = drops[("pass_at_1", "baseline")]
    assert since_base.task_set == "band-4" and since_base.drop > since_base.tolerance
    previous = {f.task_set: f for f in replies[1].figures}["band-4"].pass_at_1
    assert previous - since_base.now <= since_base.tolerance  # within tolerance of the last one
    assert "since the run's baseline" in replies[2].refusal.detail


@pytest.mark.parametrize("refuse_within_noise", [True, False])
def test_a_fall_within_noise_refuses_only_when_configured(
    tmp_path: Path, refuse_within_noise: bool
) -> None:
    cfg = CertdConfig(
        data_dir=tmp_path / "d",
        listen="127.0.0.1:0",
        acceptance=AcceptanceConfig(refuse_within_noise=refuse_within_noise),
        math=LAZY_MATH,
        countdown=NO_POOL,
    )
    server = CertdServer(cfg)
    server.start()
    try:
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            _register(c)
            policy = ScriptedModel.from_certd(c, BANDS)
            assert _evaluate(c, policy, CKPTS[0]).accepted
            assert _evaluate(c, policy, CKPTS[1]).accepted
            # band-4's policy is unchanged; its best@k moves by sampling alone
            same = ScriptedCheckpoint("step-300", CKPTS[1].routes, {"band-3": 0.7, "band-4": 0.35})
            reply = _evaluate(c, policy, same)
    finally:
        server.stop(grace_s=1.0)
    b4 = {f.task_set: f for f in reply.figures}["band-4"]
    prev = 0.0 if reply.accepted else reply.refusal.drops[0].previous
    assert b4.within_noise, b4
    if refuse_within_noise:
        assert not reply.accepted and reply.refusal.drops[0].metric == "best_at_k"
        assert reply.refusal.drops[0].drop > 0.10 and prev > b4.best_at_k
    else:
        assert reply.accepted


def test_a_set_no_evaluation_could_hold_is_refused(client: CertdClient) -> None:
    with pytest.raises(InvalidRequestError, match="at most 100000"):
        register_task_set(client, "huge", BANDS["band-4"], k=10_000, **ROUTE)
    assert "huge" not in {
        s.task_set for s in begin_acceptance(client, "r1", "c", "b" * 64, "band-3").sets
    }


def test_the_async_client_mirrors_the_flow(address: str, vkey: str) -> None:
    import asyncio

    from forkgate import AsyncCertdClient
    from forkgate.acceptance import (
        list_acceptances_async,
        promote_checkpoint_async,
        register_task_set_async,
    )

    sync = CertdClient(address)
    policy = ScriptedModel.from_certd(sync, BANDS)

    async def run() -> tuple[list[Any], str]:
        async with AsyncCertdClient(address, trusted_keys=[vkey]) as c:
            for name, tasks in BANDS.items():
                await register_task_set_async(c, name, tasks, k=8, tolerance_best_at_k=0.1, **ROUTE)
            # the ratchet's consistency source is a plain call (here over the sync client)
            ratchet = CheckpointRatchet(
                [vkey], run="a1", consistency=lambda a, b: sync.consistency_proof(a, b).hashes
            )
            promoted = []
            for ckpt in CKPTS[:3]:
                try:
                    claim = await promote_checkpoint_async(
                        c, ratchet, policy.sampler(ckpt), run="a1", checkpoint=ckpt.name,
                        checkpoint_digest=ckpt.digest, target="band-3",
                    )  # fmt: skip
                    promoted.append(claim.checkpoint)
                except PromotionRefusedError as e:
                    promoted.append(e.reason)
            return promoted, (await list_acceptances_async(c, "a1"))[-1].refusal.reason

    promoted, last = asyncio.run(run())
    sync.close()
    assert promoted[:2] == ["step-0", "step-100"] and last == "CAPABILITY_FELL"
    assert promoted[2] == "CAPABILITY_FELL"
