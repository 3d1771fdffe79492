# ruff: noqa: E501  (the tamper table reads best one tamper a line)
"""Promotion through the one trust path, and every docstring/doc example of it run verbatim.

A real certd on loopback decides acceptances for the scripted ``ScriptedModel``; the examples
are cut out of the module docstrings and docs/ratchet.md and executed as written, with the
names they use (``vkey``, ``address``, ``record``…) bound to real objects.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

import forkgate.acceptance as acceptance_module
import forkgate.checkpoint_ratchet as checkpoint_ratchet_module
import forkgate.ratchet as ratchet_module
from certd.signing.keys import SigningKey
from certd.v1 import authority_pb2
from forkgate import CertdClient
from forkgate.acceptance import evaluate_checkpoint, register_task_set
from forkgate.jobs.scripted import ScriptedCheckpoint, ScriptedModel
from forkgate.puzzles import countdown_puzzles
from forkgate.ratchet import CheckpointRatchet, RatchetState, Reason

ROOT = Path(__file__).resolve().parents[2]
U = {"+": 0.3, "-": 0.3, "*": 0.3, "/": 0.1}
TASKS3 = countdown_puzzles(32, numbers=3, seed=1, target_range=(10, 200))
STEPS = {
    "step-0": ScriptedCheckpoint("step-0", {"band-3": U}, {"band-3": 0.25}),
    "step-100": ScriptedCheckpoint("step-100", {"band-3": U}, {"band-3": 0.45}),
}
ROUTE = {"route_kappa": "countdown.first-op.v1", "route_field": "operator"}


def example(doc: str) -> str:
    """The literal block after ``Example::`` (or the first python fence), dedented."""
    if "```python\n" in doc:
        return doc.split("```python\n", 1)[1].split("```", 1)[0]
    block = doc.split("Example::\n", 1)[1]
    lines = []
    for line in block.splitlines()[1:]:
        if line and not line.startswith("    "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines))


@pytest.fixture()
def policy(address: str) -> Iterator[ScriptedModel]:
    with CertdClient(address) as c:
        register_task_set(c, "band-3", TASKS3, k=8, **ROUTE)
        yield ScriptedModel.from_certd(c, {"band-3": TASKS3})


def _certificate(
    address: str, policy: ScriptedModel, run: str
) -> authority_pb2.AcceptanceCertificate:
    with CertdClient(address) as c:
        ckpt = STEPS["step-0"]
        reply = evaluate_checkpoint(
            c, policy.sampler(ckpt), run=run, checkpoint=ckpt.name,
            checkpoint_digest=ckpt.digest, target="band-3",
        )  # fmt: skip
    assert reply.accepted
    return reply.certificate


def test_the_acceptance_example_promotes_two_checkpoints_and_keeps_the_head(
    address: str, vkey: str, policy: ScriptedModel, tmp_path: Path
) -> None:
    """Before: the second honest checkpoint was refused UNPROVEN, every later BROKEN_CHAIN."""
    for step in STEPS:
        (tmp_path / "ckpt").mkdir(exist_ok=True)
        (tmp_path / "ckpt" / step).write_bytes(step.encode() * 100)
    names: dict[str, Any] = {
        **vars(acceptance_module),
        "address": address,
        "vkey": vkey,
        "tasks3": TASKS3,
        "samplers": {step: policy.sampler(ckpt) for step, ckpt in STEPS.items()},
    }
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        exec(example(acceptance_module.__doc__ or ""), names)
    finally:
        os.chdir(cwd)
    ratchet = names["ratchet"]
    assert [c.checkpoint for c in ratchet.promoted] == ["step-0", "step-100"]
    assert names["claim"].predecessor == ratchet.promoted[0].certificate_id
    state = RatchetState.from_json((tmp_path / "ratchet.json").read_bytes())
    assert state.heads == {"run-1": names["claim"].certificate_id}
    again = CheckpointRatchet([vkey], run="run-1", state=state)
    assert again.head == names["claim"].certificate_id  # a restart continues the chain


def _env(cert: dict[str, Any]) -> dict[str, Any]:
    return json.loads(base64.b64decode(cert["envelope"]))


def _put(cert: dict[str, Any], env: dict[str, Any]) -> None:
    cert["envelope"] = base64.b64encode(json.dumps(env).encode()).decode()


def _flip(text: str) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[3] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def _payload(c: dict[str, Any]) -> None:
    env = _env(c)
    body = json.loads(base64.b64decode(env["payload"]))
    body["predicate"]["run"] = "run-x"
    env["payload"] = base64.b64encode(json.dumps(body).encode()).decode()
    _put(c, env)


def _sig(c: dict[str, Any]) -> None:
    env = _env(c)
    env["signatures"][0]["sig"] = _flip(env["signatures"][0]["sig"])
    _put(c, env)


def _keyid(c: dict[str, Any]) -> None:
    env = _env(c)
    env["signatures"][0]["keyid"] = "0badbeef"
    _put(c, env)


def _proof(c: dict[str, Any]) -> None:
    hashes = c["inclusion"].get("hashes") or []
    if hashes:
        hashes[0] = _flip(hashes[0])
    else:  # a one-entry tree has no path: move the leaf instead
        c["inclusion"]["leafIndex"] = "1"


TAMPERS: list[tuple[str, Callable[[dict[str, Any]], None], Reason]] = [
    ("certificate id", lambda c: c.update(certificateId="0" * 64), Reason.TAMPERED_CERTIFICATE_ID),
    ("ledger index", lambda c: c.update(ledgerIndex=str(int(c.get("ledgerIndex", 0)) + 1)), Reason.TAMPERED_INDEX),
    ("payload", _payload, Reason.BAD_SIGNATURE),
    ("signature", _sig, Reason.BAD_SIGNATURE),
    ("key id", _keyid, Reason.UNKNOWN_KEY),
    ("proof", _proof, Reason.BAD_PROOF),
    ("checkpoint origin copy", lambda c: c["inclusion"]["checkpoint"].update(origin="evil.example/log"), Reason.TAMPERED_CHECKPOINT),
    ("checkpoint size copy", lambda c: c["inclusion"]["checkpoint"].update(size="99"), Reason.TAMPERED_CHECKPOINT),
    ("checkpoint root copy", lambda c: c["inclusion"]["checkpoint"].update(rootHash="A" * 43 + "="), Reason.TAMPERED_CHECKPOINT),
    ("checkpoint copies deleted", lambda c: [c["inclusion"]["checkpoint"].pop(k) for k in ("origin", "size", "rootHash")], Reason.TAMPERED_CHECKPOINT),
]  # fmt: skip


def test_every_tamper_of_an_acceptance_certificate_is_refused(
    address: str, vkey: str, policy: ScriptedModel
) -> None:
    cert = _certificate(address, policy, "t1")
    digest = STEPS["step-0"].digest
    assert CheckpointRatchet([vkey], run="t1").promote(digest, cert).promoted
    doc = json_format.MessageToDict(cert)
    for name, edit, reason in TAMPERS:
        bad = copy.deepcopy(doc)
        edit(bad)
        msg = json_format.ParseDict(bad, authority_pb2.AcceptanceCertificate())
        promotion = CheckpointRatchet([vkey], run="t1").promote(digest, msg)
        assert not promotion.promoted, name
        assert {r for r, _ in promotion.reasons} == {reason}, (name, promotion.reasons)
    stranger = SigningKey.generate("stranger.example/log").verifier().to_vkey()
    promotion = CheckpointRatchet([stranger], run="t1").promote(digest, cert)
    assert {r for r, _ in promotion.reasons} == {Reason.UNKNOWN_KEY}


def test_the_checkpoint_ratchet_example_runs(
    address: str, vkey: str, policy: ScriptedModel
) -> None:
    cert = _certificate(address, policy, "run-1")
    with CertdClient(address) as client:
        names: dict[str, Any] = {
            **vars(checkpoint_ratchet_module),
            "vkey": vkey,
            "client": client,
            "certificate": cert,
            "weights_sha256": STEPS["step-0"].digest,
            "proofs": {},
        }
        exec(example(checkpoint_ratchet_module.__doc__ or ""), names)
    assert names["promotion"].promoted


def test_the_ratchet_examples_run_offline(address: str, vkey: str, tmp_path: Path) -> None:
    """The module docstring's and docs/ratchet.md's examples, on a file the builder wrote."""
    from test_trust_path import TASKS, _Witnesses

    from forkgate.forktree import ForkTreeBuilder

    tmp_path = tmp_path / "work"  # the server's own data dir is tmp_path / "certd-data"
    (tmp_path / "certd-data").mkdir(parents=True)
    (tmp_path / "certd-data" / "signing.pub").write_text(vkey + "\n")
    trees = tmp_path / "forktrees.jsonl"
    with CertdClient(address) as client:
        ForkTreeBuilder(client, _Witnesses(client, TASKS), m=3, budget=12, round_size=4).run(  # type: ignore[arg-type]
            TASKS, trees
        )
    records = [json.loads(x) for x in trees.read_text().splitlines()]
    names: dict[str, Any] = {
        **vars(ratchet_module),
        "vkey": vkey,
        "record": records[0],
        "state_path": tmp_path / "state.json",
    }
    exec(example(ratchet_module.__doc__ or ""), names)
    assert names["admission"].admitted and (tmp_path / "state.json").is_file()

    doc = (ROOT / "docs" / "ratchet.md").read_text()
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        names = {}
        exec(example(doc), names)
    finally:
        os.chdir(cwd)
    data = names["ratchet"]
    assert data.trusted is not None and len(data.coverage) == len(records)
    assert json.loads((tmp_path / "ratchet-state.json").read_text())["coverage"]
