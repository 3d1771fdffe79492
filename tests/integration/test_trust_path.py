# ruff: noqa: E501  (the tamper tables read best one tamper a line)
"""The trust path end to end: honest fork-tree files admit offline, every tamper is refused.

A real certd on loopback certifies; ``ForkTreeBuilder`` writes the file with the proofs that
link its checkpoints; ``forkgate admit`` (the CLI's ``main``) and ``forkgate check-cert`` are
run without a server. The sampler is scripted (it answers each prompt with certd's own
enumerated witnesses) because what is under test is the trust path, not the policy.
"""

from __future__ import annotations

import base64
import copy
import json
import shlex
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from certd.signing.keys import SigningKey
from forkgate import CertdClient
from forkgate.cli import main
from forkgate.forktree import ForkTreeBuilder, countdown_prompt
from forkgate.samplers import Sample

ROOT = Path(__file__).resolve().parents[2]
TASKS = [
    {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83},
    {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 93},
    {"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 85},
]
Record = dict[str, Any]


class _Witnesses:
    """A scripted policy: for each prompt, the witnesses certd enumerates for its task."""

    def __init__(self, client: CertdClient, tasks: Sequence[dict[str, Any]]) -> None:
        self.answers: dict[str, list[str]] = {}
        for task in tasks:
            fams = client.enumerate_families(task)
            self.answers[countdown_prompt(task)] = [
                f"<answer>{fams.labels[f.label_indexes[0]].witness}</answer>" for f in fams.families
            ]

    def sample(
        self,
        prompts: Sequence[str],
        n: int,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> list[list[Sample]]:
        out = []
        for p in prompts:
            answers = self.answers[p]
            out.append([Sample(answers[(i + (seed or 0)) % len(answers)], []) for i in range(n)])
        return out


def _build(address: str, folder: Path) -> Path:
    """A fork-tree file of three tasks written by the builder (resumed once midway)."""
    out = folder / "forktrees.jsonl"
    with CertdClient(address) as client:
        sampler = _Witnesses(client, TASKS)
        for part in (TASKS[:2], TASKS):  # a resumed build links to the file's last record
            ForkTreeBuilder(client, sampler, m=3, budget=12, round_size=4).run(part, out)  # type: ignore[arg-type]
    return out


@pytest.fixture()
def trees(address: str, tmp_path: Path) -> Path:
    """The honest file, built on this test's own certd."""
    return _build(address, tmp_path)


@pytest.fixture(scope="module")
def honest_trees(shared_certd_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The honest file, built once on the module's shared certd (``shared_certd``): the
    tamper tests only read it (each edits a deep copy and writes its own files), so each
    sees the same honest records a file of its own would hold."""
    return _build(f"127.0.0.1:{shared_certd_server.port}", tmp_path_factory.mktemp("trees"))


def _records(path: Path) -> list[Record]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, records: Sequence[Record]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _admit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["admit", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _reasons(out: dict[str, Any]) -> set[str]:
    return {r[0] for line in out["refused"] for r in line["reasons"]}


def test_the_readme_admit_line_admits_every_honest_record_offline(
    trees: Path, vkey: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's line, verbatim, in a directory laid out as the README's."""
    readme = (ROOT / "README.md").read_text()
    [line] = [x for x in readme.splitlines() if x.startswith(".venv/bin/forkgate admit ")]
    work = tmp_path / "work"
    (work / "certd-data").mkdir(parents=True)
    (work / "certd-data" / "signing.pub").write_text(vkey + "\n")
    (work / ".venv").symlink_to(ROOT / ".venv")
    (work / "forktrees.jsonl").write_bytes(trees.read_bytes())
    env = {"PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path / "state")}
    run = subprocess.run(
        shlex.split(line), cwd=work, env=env, capture_output=True, text=True, check=False
    )
    n = len(_records(trees))
    assert n == 3 and all(len(r["families"]) >= 2 for r in _records(trees))
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith(f"admitted {n}, refused 0"), run.stdout
    assert len((work / "admitted.jsonl").read_text().splitlines()) == n
    [state] = (tmp_path / "state" / "forkgate").glob("ratchet-*.json")
    assert json.loads(state.read_text())["trusted"]["size"] >= 9
    again = subprocess.run(
        shlex.split(line), cwd=work, env=env, capture_output=True, text=True, check=False
    )
    assert again.returncode == 0 and again.stdout.startswith(f"admitted {n}, refused 0")

    # the README's check-cert and audit lines, verbatim, on what this build wrote
    (work / "cert.json").write_text(json.dumps(_records(trees)[0]["families"][0]["certificate"]))
    for prefix, cwd, says in (
        (".venv/bin/forkgate check-cert ", work, "certificate OK"),
        (".venv/bin/certd audit --data-dir ", tmp_path, "OK"),
    ):
        [line] = [x for x in readme.splitlines() if x.startswith(prefix)]
        (tmp_path / ".venv").unlink(missing_ok=True)
        (tmp_path / ".venv").symlink_to(ROOT / ".venv")
        done = subprocess.run(
            shlex.split(line, comments=True),
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0 and says in done.stdout, done.stdout + done.stderr


def test_successive_runs_with_one_state_never_shrink_coverage(
    trees: Path, vkey: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "ratchet.json"
    out = str(tmp_path / "admitted.jsonl")
    code, first = _admit(
        capsys, "--trust", vkey, "--in", str(trees), "--out", out, "--state", str(state)
    )
    assert code == 0 and first["admitted"] == 3
    shrunk = _records(trees)[1]
    shrunk["families"] = shrunk["families"][:1]
    smaller = _write(tmp_path / "smaller.jsonl", [shrunk])
    code, second = _admit(
        capsys, "--trust", vkey, "--in", str(smaller), "--out", out, "--state", str(state)
    )
    assert code == 1 and second["admitted"] == 0
    assert _reasons(second) == {"COVERAGE_SHRANK"}
    # without the state, the same record is admitted: the memory is what refuses it
    code, fresh = _admit(capsys, "--trust", vkey, "--in", str(smaller), "--out", out, "--no-state")
    assert code == 0 and fresh["admitted"] == 1
    # and an older record whose checkpoint the state knows still admits offline
    first_only = _write(tmp_path / "first.jsonl", _records(trees)[:1])
    code, old = _admit(
        capsys, "--trust", vkey, "--in", str(first_only), "--out", out, "--state", str(state)
    )
    assert code == 0 and old["admitted"] == 1


def _envelope(cert: dict[str, Any]) -> dict[str, Any]:
    return json.loads(base64.b64decode(cert["envelope"]))


def _set_envelope(cert: dict[str, Any], env: dict[str, Any]) -> None:
    cert["envelope"] = base64.b64encode(json.dumps(env).encode()).decode()


def _flip_b64(text: str, at: int = 5) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[at] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def _payload(cert: dict[str, Any]) -> None:
    env = _envelope(cert)
    body = json.loads(base64.b64decode(env["payload"]))
    body["predicate"]["label"] = "99,+"
    env["payload"] = base64.b64encode(json.dumps(body).encode()).decode()
    _set_envelope(cert, env)


def _signature(cert: dict[str, Any]) -> None:
    env = _envelope(cert)
    env["signatures"][0]["sig"] = _flip_b64(env["signatures"][0]["sig"])
    _set_envelope(cert, env)


def _keyid(cert: dict[str, Any]) -> None:
    env = _envelope(cert)
    env["signatures"][0]["keyid"] = "00000000"
    _set_envelope(cert, env)


def _payload_type(cert: dict[str, Any]) -> None:
    env = _envelope(cert)
    env["payloadType"] = "application/json"
    _set_envelope(cert, env)


def _proof_hash(cert: dict[str, Any]) -> None:
    cert["inclusion"]["hashes"][0] = _flip_b64(cert["inclusion"]["hashes"][0], 0)


def _witness_copy(cert: dict[str, Any]) -> None:
    cert["witness"] = cert["witness"].replace("25", "24", 1)


# Tampers of the certificate message itself: (name, edit, admit's reason, check-cert's error)
CERT_TAMPERS: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("certificate id", lambda c: c.update(certificateId="0" * 64), "TAMPERED_CERTIFICATE_ID", "TamperedError"),
    ("ledger index", lambda c: c.update(ledgerIndex=str(int(c.get("ledgerIndex", 0)) + 1)), "TAMPERED_INDEX", "TamperedError"),
    ("label value", lambda c: c["label"].update(value="99,+"), "TAMPERED_LABEL", "TamperedError"),
    ("label kappa", lambda c: c["label"].update(kappa="countdown.first-op.v9"), "TAMPERED_LABEL", "TamperedError"),
    ("label fields", lambda c: c["label"]["fields"].update(operand="99"), "TAMPERED_LABEL", "TamperedError"),
    ("witness copy", _witness_copy, "TAMPERED_WITNESS", "TamperedError"),
    ("proof hash", _proof_hash, "BAD_PROOF", "RootMismatchError"),
    ("payload", _payload, "BAD_SIGNATURE", "BadSignatureError"),
    ("signature", _signature, "BAD_SIGNATURE", "BadSignatureError"),
    ("key id", _keyid, "UNKNOWN_KEY", "UnknownKeyError"),
    ("payload type", _payload_type, "MALFORMED", "MalformedStatementError"),
    ("checkpoint origin copy", lambda c: c["inclusion"]["checkpoint"].update(origin="evil.example/log"), "TAMPERED_CHECKPOINT", "TamperedError"),
    ("checkpoint size copy", lambda c: c["inclusion"]["checkpoint"].update(size="99"), "TAMPERED_CHECKPOINT", "TamperedError"),
    ("checkpoint root copy", lambda c: c["inclusion"]["checkpoint"].update(rootHash="A" * 43 + "="), "TAMPERED_CHECKPOINT", "TamperedError"),
    ("checkpoint copies deleted", lambda c: [c["inclusion"]["checkpoint"].pop(k) for k in ("origin", "size", "rootHash")], "TAMPERED_CHECKPOINT", "TamperedError"),
    ("label copy deleted", lambda c: c.pop("label"), "TAMPERED_LABEL", "TamperedError"),
    ("witness copy deleted", lambda c: c.pop("witness"), "TAMPERED_WITNESS", "TamperedError"),
    ("unknown field", lambda c: c.update(extra=1), "MALFORMED", "MalformedStatementError"),
    ("unparsable field", lambda c: c.update(ledgerIndex="seven"), "MALFORMED", "MalformedStatementError"),
]  # fmt: skip


@pytest.mark.shared_certd  # reads the honest file; its vkey is the shared server's
@pytest.mark.parametrize(
    ("name", "edit", "reason", "error"), CERT_TAMPERS, ids=[t[0] for t in CERT_TAMPERS]
)
def test_every_tamper_of_a_certificate_is_refused_by_admit_and_check_cert(
    honest_trees: Path,
    vkey: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    edit: Callable[[dict[str, Any]], None],
    reason: str,
    error: str,
) -> None:
    record = _records(honest_trees)[2]
    honest = _write(tmp_path / "honest.jsonl", [record])
    out = str(tmp_path / "out.jsonl")
    assert _admit(capsys, "--trust", vkey, "--in", str(honest), "--out", out, "--no-state")[0] == 0
    cert = record["families"][0]["certificate"]
    assert cert["witness"] and cert["label"]["fields"], "certd sends the copies under test"
    cert_file = tmp_path / "cert.json"
    cert_file.write_text(json.dumps(cert))
    capsys.readouterr()
    assert main(["check-cert", str(cert_file), "--trust", vkey, "--json"]) == 0

    bad = copy.deepcopy(record)
    edit(bad["families"][0]["certificate"])
    code, refused = _admit(
        capsys,
        "--trust",
        vkey,
        "--in",
        str(_write(tmp_path / "bad.jsonl", [bad])),
        "--out",
        out,
        "--no-state",
    )
    assert code == 1 and refused["admitted"] == 0
    assert _reasons(refused) == {reason}, refused
    cert_file.write_text(json.dumps(bad["families"][0]["certificate"]))
    capsys.readouterr()
    assert main(["check-cert", str(cert_file), "--trust", vkey, "--json"]) == 1
    said = json.loads(capsys.readouterr().out)
    assert said["ok"] is False and said["reason"] == error, said


def _record_witness(r: Record) -> None:
    r["families"][0]["witness"] = r["families"][0]["witness"].replace("25", "24", 1)


def _record_label(r: Record) -> None:
    r["families"][0]["label"] = r["families"][1]["label"]


def _task_digest(r: Record) -> None:
    r["task_digest"] = "0" * 64


def _consistency(r: Record) -> None:
    r["consistency"][0]["hashes"][0] = "00" * 32


RECORD_TAMPERS = [
    ("record witness", _record_witness, {"TAMPERED_WITNESS"}),
    ("record label", _record_label, {"TAMPERED_LABEL"}),
    ("task digest copy", _task_digest, {"TAMPERED_TASK_DIGEST"}),
    ("consistency proof", _consistency, {"INCONSISTENT_CHECKPOINT"}),
    ("family listed three times", lambda r: r.update(families=[r["families"][0]] * 2 + r["families"]), {"DUPLICATE_FAMILY"}),
    ("feasible count lowered", lambda r: r.update(feasible_labels=2), {"TAMPERED_FEASIBLE"}),
    ("unknown record field", lambda r: r.update(extra=1), {"MALFORMED"}),
    ("unknown family field", lambda r: r["families"][0].update(extra=1), {"MALFORMED"}),
    ("unknown task field", lambda r: r["task"].update(extra=1), {"MALFORMED"}),
]  # fmt: skip


@pytest.mark.shared_certd  # reads the honest file; its vkey is the shared server's
@pytest.mark.parametrize(
    ("name", "edit", "reasons"), RECORD_TAMPERS, ids=[t[0] for t in RECORD_TAMPERS]
)
def test_every_tamper_of_a_record_is_refused(
    honest_trees: Path,
    vkey: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    edit: Callable[[Record], None],
    reasons: set[str],
) -> None:
    state = tmp_path / "ratchet.json"
    records = _records(honest_trees)
    out = str(tmp_path / "out.jsonl")
    first = _write(tmp_path / "first.jsonl", records[:1])
    assert (
        _admit(capsys, "--trust", vkey, "--in", str(first), "--out", out, "--state", str(state))[0]
        == 0
    )
    bad = copy.deepcopy(records[1])
    assert bad["consistency"], "the builder links each record to the one before"
    edit(bad)
    code, refused = _admit(
        capsys,
        "--trust",
        vkey,
        "--in",
        str(_write(tmp_path / "bad.jsonl", [bad])),
        "--out",
        out,
        "--state",
        str(state),
    )
    assert code == 1 and _reasons(refused) == reasons, refused


def test_another_key_is_unknown_and_a_usage_error_exits_2(
    trees: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stranger = SigningKey.generate("stranger.example/log").verifier().to_vkey()
    code, out = _admit(
        capsys, "--trust", stranger, "--in", str(trees), "--out", str(tmp_path / "o"), "--no-state"
    )
    assert code == 1 and _reasons(out) == {"UNKNOWN_KEY"}
    assert (
        main(
            [
                "admit",
                "--trust",
                stranger,
                "--in",
                str(tmp_path / "absent.jsonl"),
                "--out",
                str(tmp_path / "x"),
                "--no-state",
            ]
        )
        == 2
    )
    assert not (tmp_path / "x").exists()  # nothing half-written on a usage error


def test_admit_with_certd_down_exits_3_and_offline_without_proofs_refuses(
    trees: Path, vkey: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file without proofs: offline it is refused (exit 1); fetching from a dead certd is 3."""
    records = _records(trees)
    for r in records:
        r.pop("consistency", None)  # nothing attached: a proof must be fetched
    bare = _write(tmp_path / "bare.jsonl", records)
    args = ["--trust", vkey, "--in", str(bare), "--out", str(tmp_path / "o"), "--no-state"]
    code, out = _admit(capsys, *args)
    assert code == 1 and _reasons(out) <= {"UNPROVEN_CHECKPOINT", "STALE_CHECKPOINT"}, out
    assert main(["admit", *args, "--server", "127.0.0.1:1"]) == 3


def test_a_record_with_a_duplicated_key_is_refused_and_admitted_records_are_re_emitted(
    trees: Path, vkey: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = _records(trees)[0]
    decoy = json.dumps({"domain": "countdown", "task": {"numbers": [1, 2], "target": 3}})
    text = '{"task": ' + decoy + ", " + json.dumps(record)[1:] + "\n"
    dup = tmp_path / "dup.jsonl"
    dup.write_text(text)
    out = tmp_path / "out.jsonl"
    args = ["--trust", vkey, "--out", str(out), "--no-state"]
    code, refused = _admit(capsys, "--in", str(dup), *args)
    assert code == 1 and _reasons(refused) == {"MALFORMED"}, refused
    assert "duplicate key 'task'" in refused["refused"][0]["reasons"][0][1]

    # the admitted file is rebuilt from verified values: a run statistic written as a
    # string stays, a signed count is the signed one, certificates are re-serialised
    honest = copy.deepcopy(record)
    honest["families"][0]["certificate"]["ledgerIndex"] = int(
        honest["families"][0]["certificate"].get("ledgerIndex", 0)
    )
    assert _admit(capsys, "--in", str(_write(tmp_path / "h.jsonl", [honest])), *args)[0] == 0
    [written] = _records(out)
    assert written["feasible_labels"] == record["feasible_labels"]
    assert written["families"][0]["certificate"] == record["families"][0]["certificate"]
    assert set(written) <= set(record) | {"consistency"}


def test_metrics_count_signed_families_and_the_signed_feasible_count(
    trees: Path, vkey: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def metrics(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
        capsys.readouterr()
        code = main(["metrics", "--in", str(path), "--json", *extra])
        return code, json.loads(capsys.readouterr().out)

    records = _records(trees)
    code, honest = metrics(trees, "--trust", vkey)
    assert code == 0 and 0 < honest["coverage"] <= 1, honest
    assert honest["feasible_labels"] == sum(r["feasible_labels"] for r in records)
    lowered = copy.deepcopy(records)
    for r in lowered:
        r["feasible_labels"] = 2
    assert metrics(_write(tmp_path / "low.jsonl", lowered)) == (0, honest)
    tripled = copy.deepcopy(records)
    tripled[0]["families"] = [tripled[0]["families"][0]] * 3
    code, refused = metrics(_write(tmp_path / "dup.jsonl", tripled))
    assert code == 1 and "DUPLICATE_FAMILY" in refused["error"], refused
    forged = copy.deepcopy(records)
    forged[0]["families"][0]["certificate"]["inclusion"]["checkpoint"]["size"] = "99"
    assert metrics(_write(tmp_path / "forged.jsonl", forged), "--trust", vkey)[0] == 1
