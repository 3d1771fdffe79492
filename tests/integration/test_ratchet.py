"""The ratchet against real certd servers: good records in, each kind of bad one out."""

from __future__ import annotations

import base64
import copy
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from server_helpers import LAZY_MATH, NO_POOL

from certd.config import CertdConfig
from certd.service.server import CertdServer
from forkgate import CertdClient
from forkgate.certified import CertifiedDataset
from forkgate.ratchet import Ratchet, Reason

TASK = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}
OTHER = {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 93}
KAPPA = "countdown.first-op.v1"


def record(client: CertdClient, task: dict[str, Any], n: int | None = None) -> dict[str, Any]:
    """A fork-tree record: the first label of each family, certified with its witness."""
    assert client.enumerate_families(task).certifiable_families == len(
        client.enumerate_families(task).families
    ), "pick a task whose families all have a solution of their own"
    fams = client.enumerate_families(task)
    families = []
    for fam in list(fams.families)[:n]:
        lw = fams.labels[fam.label_indexes[0]]
        cert = client.certify(task, lw.label.value, lw.witness)
        families.append(
            {
                "label": lw.label.value,
                "witness": lw.witness,
                "certificate": json_format.MessageToDict(cert),
            }
        )
    return {"task": task, "families": families}


def ratchet_for(address: str, vkey: str, **kw: Any) -> Ratchet:
    client = CertdClient(address)
    return Ratchet(
        [vkey], kappas={KAPPA}, consistency=lambda a, b: client.consistency_proof(a, b).hashes, **kw
    )


def reasons(r: Ratchet, rec: dict[str, Any]) -> set[Reason]:
    admission = r.admit(rec)
    assert not admission.admitted
    return {reason for reason, _ in admission.reasons}


def test_good_records_are_admitted_and_coverage_never_shrinks(address: str, vkey: str) -> None:
    with CertdClient(address) as c:
        full = record(c, TASK)
        other = record(c, OTHER)
    assert len(full["families"]) >= 2
    r = ratchet_for(address, vkey)
    assert r.admit(full).admitted
    assert r.admit(other).admitted
    assert r.admit(full).admitted  # the same record again is fine
    smaller = {**full, "families": full["families"][:1]}
    assert reasons(r, smaller) == {Reason.COVERAGE_SHRANK}
    assert reasons(Ratchet([vkey], kappas={"countdown.first-op.v2"}), full) == {Reason.WRONG_KAPPA}


def test_forged_replayed_tampered_records_are_refused(address: str, vkey: str) -> None:
    with CertdClient(address) as c:
        good = record(c, TASK, 1)
        other = record(c, OTHER, 1)
    forged = copy.deepcopy(good)
    cert = forged["families"][0]["certificate"]
    env = json.loads(base64.b64decode(cert["envelope"]))
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[5] ^= 1
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    cert["envelope"] = base64.b64encode(json.dumps(env).encode()).decode()
    assert reasons(ratchet_for(address, vkey), forged) == {Reason.BAD_SIGNATURE}

    replayed = copy.deepcopy(good)
    replayed["task"] = OTHER
    replayed["families"][0]["label"] = good["families"][0]["label"]
    assert Reason.REPLAYED in reasons(ratchet_for(address, vkey), replayed)

    tampered = copy.deepcopy(good)
    tampered["families"][0]["witness"] += "+0"
    assert reasons(ratchet_for(address, vkey), tampered) == {Reason.TAMPERED_WITNESS}

    relabelled = copy.deepcopy(other)
    relabelled["families"][0]["label"] = "99,+"
    assert reasons(ratchet_for(address, vkey), relabelled) == {Reason.TAMPERED_LABEL}

    moved = copy.deepcopy(good)
    inclusion = moved["families"][0]["certificate"]["inclusion"]
    inclusion["leafIndex"] = str(int(inclusion.get("leafIndex", "0")) + 1)
    assert reasons(ratchet_for(address, vkey), moved) == {Reason.BAD_PROOF}
    assert reasons(ratchet_for(address, vkey), {"task": TASK}) == {Reason.MALFORMED}


@pytest.fixture()
def alien(tmp_path: Path) -> Iterator[CertdServer]:
    server = CertdServer(
        CertdConfig(
            data_dir=tmp_path / "alien", listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL
        )
    )
    server.start()
    yield server
    server.stop(grace_s=1)


def test_alien_key_is_unknown(address: str, vkey: str, alien: CertdServer) -> None:
    with CertdClient(f"127.0.0.1:{alien.port}") as c:
        rec = record(c, TASK, 1)
    assert reasons(ratchet_for(address, vkey), rec) == {Reason.UNKNOWN_KEY}


def test_stale_checkpoint_is_refused(address: str, vkey: str) -> None:
    with CertdClient(address) as c:
        old = record(c, TASK, 1)
        new = record(c, OTHER)
    r = ratchet_for(address, vkey)
    assert r.admit(new).admitted
    assert r.admit(old).admitted  # older, but proven a prefix of the trusted tree
    offline = Ratchet([vkey], kappas={KAPPA}, trusted=r.trusted)
    assert reasons(offline, old) == {Reason.STALE_CHECKPOINT}
    first = Ratchet([vkey], kappas={KAPPA})
    assert first.admit(old).admitted
    assert reasons(first, new) == {Reason.UNPROVEN_CHECKPOINT}


def test_a_forked_log_is_inconsistent(tmp_path: Path) -> None:
    first = CertdServer(
        CertdConfig(
            data_dir=tmp_path / "a", listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL
        )
    )
    first.start()
    with CertdClient(f"127.0.0.1:{first.port}") as c:
        record(c, TASK, 1)
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
        assert vkey == b.key.verifier().to_vkey()
        with CertdClient(f"127.0.0.1:{a.port}") as ca, CertdClient(f"127.0.0.1:{b.port}") as cb:
            on_a = record(ca, OTHER, 1)
            on_b = record(cb, {**OTHER, "target": 90}, 1)  # the histories diverge here
            r = Ratchet(
                [vkey], kappas={KAPPA}, consistency=lambda x, y: cb.consistency_proof(x, y).hashes
            )
            assert r.admit(on_a).admitted
            assert reasons(r, on_b) == {Reason.INCONSISTENT_CHECKPOINT}
    finally:
        a.stop(grace_s=1)
        b.stop(grace_s=1)


def test_certified_dataset_yields_only_admitted_records(
    address: str, vkey: str, tmp_path: Path
) -> None:
    with CertdClient(address) as c:
        good = record(c, TASK)
    bad = copy.deepcopy(good)
    bad["families"][0]["witness"] = "1+1"
    path = tmp_path / "trees.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in (good, bad)) + "\n{not json\n")
    data = CertifiedDataset.from_jsonl(path, ratchet_for(address, vkey))
    assert list(data) == [good]
    assert [n for n, _ in data.refused] == [1, 2]


def test_hugging_face_export_holds_only_admitted_families(address: str, vkey: str) -> None:
    with CertdClient(address) as c:
        good = record(c, TASK)
        other = record(c, OTHER)
    bad = copy.deepcopy(other)
    bad["families"][0]["witness"] = "1+1"
    ds = CertifiedDataset([good, bad], ratchet_for(address, vkey)).to_hf()
    assert ds.num_rows == len(good["families"])
    assert sorted(ds["label"]) == sorted(f["label"] for f in good["families"])
    cert = json.loads(ds[0]["certificate"])
    assert cert["certificateId"] == good["families"][0]["certificate"]["certificateId"]
