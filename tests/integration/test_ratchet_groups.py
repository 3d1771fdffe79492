"""The ratchet admits stratified groups from real certd receipts and refuses each bad kind."""

from __future__ import annotations

import base64
import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from server_helpers import LAZY_MATH, NO_POOL
from test_ratchet import KAPPA, OTHER, TASK, ratchet_for, reasons

from certd.config import CertdConfig
from certd.service.server import CertdServer
from forkgate import CertdClient
from forkgate.certified import CertifiedDataset
from forkgate.groups import group_records
from forkgate.ratchet import Ratchet, Reason

RESPONSES = [
    "<answer>(25-5)*4+3</answer>",  # 25,- correct
    "<answer>25-5+4+3</answer>",  # 25,- wrong
    "<answer>4*(25-5)+3</answer>",  # 4,* correct
    "<answer>(25-5)*4-3</answer>",  # 25,- wrong
]


def groups(client: CertdClient, task: dict[str, Any], responses: list[str]) -> dict[str, Any]:
    """Group records by family from one real VerifyBatch (verdicts with their receipt)."""
    pairs = client.verify_batch_receipted([(task, r) for r in responses])
    recs = group_records(task, [(r, v, rc) for r, (v, rc) in zip(responses, pairs, strict=True)])
    return {g["family"]: g for g in recs}


def test_groups_are_admitted_once_per_rollout(address: str, vkey: str) -> None:
    with CertdClient(address, trusted_keys=[vkey]) as c:
        by_family = groups(c, TASK, RESPONSES)
        cert = c.certify(TASK, "4,*", "4*(25-5)+3")
    assert sorted(by_family) == ["25,-", "4,*"]
    common, rare = by_family["25,-"], by_family["4,*"]
    assert len(common["rollouts"]) == 3 and len(rare["rollouts"]) == 1
    r = ratchet_for(address, vkey)
    assert r.admit(common).admitted
    assert r.admit(common).admitted  # the same group again
    with_cert = {**rare, "certificate": json_format.MessageToDict(cert), "witness": cert.witness}
    assert r.admit(with_cert).admitted
    # A rollout belongs to one group: moving it into another, or doubling it, is a replay.
    mixed = {**common, "rollouts": common["rollouts"][:2]}
    assert reasons(r, mixed) == {Reason.REPLAYED}
    doubled = {**rare, "rollouts": rare["rollouts"] * 2}
    assert Reason.REPLAYED in reasons(ratchet_for(address, vkey), doubled)
    assert reasons(Ratchet([vkey], kappas={"countdown.first-op.v2"}), common) == {
        Reason.WRONG_KAPPA
    }
    assert reasons(r, {**common, "rollouts": []}) == {Reason.MALFORMED}
    assert reasons(r, {**common, "rollouts": [{"response": "x"}]}) == {Reason.MALFORMED}


def test_forged_replayed_tampered_groups_are_refused(address: str, vkey: str) -> None:
    with CertdClient(address) as c:
        good = groups(c, TASK, RESPONSES)["25,-"]
        other = groups(c, OTHER, ["<answer>(25-5)*4+3</answer>"])
        cert_other = c.certify(OTHER, "25,-", "(25-3)*4+5")

    forged = copy.deepcopy(good)
    receipt = forged["rollouts"][0]["receipt"]
    env = json.loads(base64.b64decode(receipt["envelope"]))
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[3] ^= 1
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    receipt["envelope"] = base64.b64encode(json.dumps(env).encode()).decode()
    assert reasons(ratchet_for(address, vkey), forged) == {Reason.BAD_SIGNATURE}

    replayed = copy.deepcopy(good)
    replayed["rollouts"].append(next(iter(other.values()))["rollouts"][0])
    assert reasons(ratchet_for(address, vkey), replayed) == {Reason.REPLAYED}
    unhinted = copy.deepcopy(replayed)
    del unhinted["rollouts"][-1]["task_sha256"]  # still refused, as a mismatch
    assert reasons(ratchet_for(address, vkey), unhinted) == {Reason.TAMPERED_WITNESS}

    tampered = copy.deepcopy(good)
    tampered["rollouts"][1]["response"] = "<answer>(25-5)*4+3</answer>"
    assert reasons(ratchet_for(address, vkey), tampered) == {Reason.TAMPERED_WITNESS}
    promoted = copy.deepcopy(good)
    promoted["rollouts"][1]["verdict"]["reward"] = 1.0
    promoted["rollouts"][1]["verdict"]["status"] = "CORRECT"
    assert reasons(ratchet_for(address, vkey), promoted) == {Reason.TAMPERED_WITNESS}

    relabelled = copy.deepcopy(good)
    relabelled["family"] = "4,*"
    assert reasons(ratchet_for(address, vkey), relabelled) == {Reason.WRONG_SUBJECT}

    moved = copy.deepcopy(good)
    path = moved["rollouts"][0]["verdict"]["receiptPath"]
    path["index"] = str(int(path.get("index", "0")) + 1)
    assert reasons(ratchet_for(address, vkey), moved) == {Reason.BAD_PROOF}
    unlogged = copy.deepcopy(good)
    inclusion = unlogged["rollouts"][0]["receipt"]["inclusion"]
    inclusion["leafIndex"] = str(int(inclusion.get("leafIndex", "0")) + 1)
    assert Reason.BAD_PROOF in reasons(ratchet_for(address, vkey), unlogged)

    foreign_cert = {
        **good,
        "certificate": json_format.MessageToDict(cert_other),
        "witness": cert_other.witness,
    }
    assert reasons(ratchet_for(address, vkey), foreign_cert) == {Reason.REPLAYED}


def test_alien_receipts_and_stale_checkpoints(address: str, vkey: str, tmp_path: Path) -> None:
    alien = CertdServer(
        CertdConfig(
            data_dir=tmp_path / "alien", listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL
        )
    )
    alien.start()
    try:
        with CertdClient(f"127.0.0.1:{alien.port}") as c:
            from_alien = groups(c, TASK, RESPONSES[:1])["25,-"]
    finally:
        alien.stop(grace_s=1)
    assert reasons(ratchet_for(address, vkey), from_alien) == {Reason.UNKNOWN_KEY}

    with CertdClient(address) as c:
        old = groups(c, TASK, RESPONSES[:1])["25,-"]
        new = groups(c, OTHER, RESPONSES[:1])["25,-"]
    r = ratchet_for(address, vkey)
    assert r.admit(new).admitted
    assert r.admit(old).admitted  # older, but proven a prefix of the trusted tree
    offline = Ratchet([vkey], kappas={KAPPA}, trusted=r.trusted)
    assert reasons(offline, old) == {Reason.STALE_CHECKPOINT}
    first = Ratchet([vkey], kappas={KAPPA})
    assert first.admit(old).admitted
    assert reasons(first, new) == {Reason.UNPROVEN_CHECKPOINT}


def test_a_group_from_a_forked_log_is_inconsistent(tmp_path: Path) -> None:
    first = CertdServer(
        CertdConfig(
            data_dir=tmp_path / "a", listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL
        )
    )
    first.start()
    with CertdClient(f"127.0.0.1:{first.port}") as c:
        groups(c, TASK, RESPONSES[:1])
    first.stop(grace_s=1)
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # same key, same history so far
    a = CertdServer(
        CertdConfig(
            data_dir=tmp_path / "a", listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL
        )
    )
    b = CertdServer(
        CertdConfig(
            data_dir=tmp_path / "b", listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL
        )
    )
    a.start()
    b.start()
    try:
        vkey = a.key.verifier().to_vkey()
        with CertdClient(f"127.0.0.1:{a.port}") as ca, CertdClient(f"127.0.0.1:{b.port}") as cb:
            on_a = groups(ca, OTHER, RESPONSES[:1])["25,-"]
            on_b = groups(cb, TASK, RESPONSES[2:3])["4,*"]  # the histories diverge here
            r = Ratchet(
                [vkey], kappas={KAPPA}, consistency=lambda x, y: cb.consistency_proof(x, y).hashes
            )
            assert r.admit(on_a).admitted
            assert reasons(r, on_b) == {Reason.INCONSISTENT_CHECKPOINT}
    finally:
        a.stop(grace_s=1)
        b.stop(grace_s=1)


def test_certified_dataset_rows_of_groups(address: str, vkey: str) -> None:
    with CertdClient(address) as c:
        by_family = groups(c, TASK, RESPONSES)
    bad = copy.deepcopy(by_family["4,*"])
    bad["rollouts"][0]["response"] = "<answer>1</answer>"
    data = CertifiedDataset([by_family["25,-"], bad], ratchet_for(address, vkey))
    rows = list(data.rows())
    assert [r["kind"] for r in rows] == ["rollout"] * 3
    assert rows[0]["reward"] == 1.0 and rows[0]["status"] == "CORRECT"
    assert {r["label"] for r in rows} == {"25,-"}
    assert [n for n, _ in data.refused] == [1]
    ds = CertifiedDataset([by_family["25,-"]], ratchet_for(address, vkey)).to_hf()
    assert ds.num_rows == 3 and json.loads(ds[0]["verdict"])["status"] == "CORRECT"


def test_admit_command_takes_groups(address: str, vkey: str, tmp_path: Path) -> None:
    with CertdClient(address) as c:
        by_family = groups(c, TASK, RESPONSES)
    bad = copy.deepcopy(by_family["4,*"])
    bad["rollouts"][0]["verdict"]["reward"] = 0.5
    src, out = tmp_path / "groups.jsonl", tmp_path / "admitted.jsonl"
    src.write_text("".join(json.dumps(g) + "\n" for g in (by_family["25,-"], bad)))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "forkgate.cli",
            "admit",
            "--trust",
            vkey,
            "--server",
            address,
            "--in",
            str(src),
            "--out",
            str(out),
            "--state",
            str(tmp_path / "ratchet.json"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 1, run.stderr  # a refused group fails the command (strict)
    report = json.loads(run.stdout)
    assert report["admitted"] == 1
    assert report["refused"][0]["line"] == 2
    assert report["refused"][0]["reasons"][0][0] == "TAMPERED_WITNESS"
    assert [json.loads(x)["family"] for x in out.read_text().splitlines()] == ["25,-"]
