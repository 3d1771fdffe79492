"""The main job on the embedded default, as ``make run`` runs it.

Until the trainer side exists this is a scripted client run: start ``certd serve`` on a fresh
data dir, generate Countdown puzzles, enumerate their feasible families, verify a batch of
responses (correct witnesses, commuted pseudo-forks, wrong answers, malformed and rule-breaking
ones), certify every verified family, try the pseudo-forks (the gate must refuse them), fetch
the fork trees, audit the ledger over gRPC and offline, and print a one-screen summary.

Example::

    forkgate demo --workdir out/demo --tasks 40
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tqdm import tqdm

from certd.v1 import tasks_pb2

from ._base import VerifyItem
from .client import CertdClient
from .errors import CertificationRefusedError
from .local import LocalCertd
from .puzzles import countdown_puzzles

__all__ = ["run_demo"]


def _responses(puzzle: dict[str, Any], witnesses: list[str], rng: random.Random) -> list[str]:
    """Model-like responses for one puzzle: witnesses plus the usual failure modes."""
    n = puzzle["numbers"]
    # Enumerated witnesses: labels of one family are renderings of one solution, so the gate
    # certifies the first of each family and refuses the rest as pseudo-forks.
    out = [f"<think>try {w}</think><answer>{w}</answer>" for w in witnesses]
    out.append(f"<answer>{'+'.join(str(x) for x in n)}</answer>")  # usually wrong
    out.append("I think the answer is forty-two.")  # nothing parseable
    out.append(f"<answer>{n[0]}**{n[1]}</answer>")  # forbidden operator
    out.append(f"<answer>{n[0]}+{n[0]}</answer>")  # a number used twice
    rng.shuffle(out)
    return out


def run_demo(workdir: Path, *, tasks: int = 40, seed: int = 0, as_json: bool = False) -> int:
    """Run the scripted end-to-end job; return the exit status (0 when the audit is clean)."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    data_dir = workdir / "certd-data"
    started = time.perf_counter()
    certd = LocalCertd(data_dir)
    address, vkey = certd.address, certd.vkey
    rng = random.Random(seed)
    summary: dict[str, Any] = {"server": address, "workdir": str(workdir)}
    try:
        with CertdClient(address, trusted_keys=[vkey]) as client:
            puzzles = countdown_puzzles(tasks, seed=seed)
            feasible: list[int] = []
            certifiable: list[int] = []
            family_of: list[dict[str, int]] = []
            items: list[VerifyItem] = []
            for t, p in enumerate(tqdm(puzzles, desc="enumerate", disable=None, file=sys.stderr)):
                fams = client.enumerate_families(p)
                feasible.append(len(fams.families))
                certifiable.append(fams.certifiable_families)
                family_of.append(
                    {
                        fams.labels[i].label.value: f
                        for f, g in enumerate(fams.families)
                        for i in g.label_indexes
                    }
                )
                witnesses = [lw.witness for lw in fams.labels]
                for r, text in enumerate(_responses(p, witnesses, rng)):
                    items.append(VerifyItem(p, text, f"t{t}-r{r}"))
            verdicts = client.verify_batch(items)
            statuses = Counter(tasks_pb2.VerdictStatus.Name(v.status) for v in verdicts)
            with (workdir / "verdicts.jsonl").open("w") as f:
                for item, v in zip(items, verdicts, strict=True):
                    f.write(
                        json.dumps(
                            {
                                "id": v.id,
                                "task": item.task,
                                "status": tasks_pb2.VerdictStatus.Name(v.status),
                                "family": v.family.value,
                                "answer": v.answer,
                            }
                        )
                        + "\n"
                    )
            to_certify = [
                (item.task, v.family.value, v.answer)
                for item, v in zip(items, verdicts, strict=True)
                if v.status == tasks_pb2.CORRECT
            ]
            results = client.certify_batch(to_certify)
            refusals = Counter(
                r.reason for r in results if isinstance(r, CertificationRefusedError)
            )
            trees = [client.get_fork_tree(p) for p in puzzles]
            labels_certified = sum(len(t.certificates) for t in trees)
            covered = [
                len({family_of[n][cert.label.value] for cert in tree.certificates})
                for n, tree in enumerate(trees)
            ]
            cp = client.checkpoint()
        audit_remote = _audit(
            ["--server", address, "--trust", vkey, "--state", str(workdir / "auditor-state.json")]
        )
    finally:
        certd.stop()
    audit_offline = _audit(
        ["--data-dir", str(data_dir), "--state", str(workdir / "offline-state.json")]
    )
    ok = bool(audit_remote["ok"] and audit_offline["ok"])
    summary.update(
        {
            "tasks": tasks,
            "responses": len(items),
            "statuses": dict(sorted(statuses.items())),
            "certify_requests": len(to_certify),
            "labels_certified": labels_certified,
            "refusals": dict(refusals),
            "families_certified": sum(covered),
            "families_feasible": sum(feasible),
            "families_certifiable_together": sum(certifiable),
            "coverage": round(sum(covered) / max(1, sum(feasible)), 4),
            "ledger_size": cp.size,
            "audit_over_grpc": audit_remote,
            "audit_offline": audit_offline,
            "seconds": round(time.perf_counter() - started, 2),
        }
    )
    (workdir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if as_json:
        print(json.dumps(summary))
    else:
        print(_screen(summary))
    return 0 if ok else 1


def _audit(args: list[str]) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, "-m", "certd.cli", "audit", "--json", *args],
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
    )
    try:
        report: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        report = {"ok": False, "faults": [run.stderr.strip()[-500:]]}
    return {
        "ok": bool(report.get("ok")),
        "size": report.get("size"),
        "faults": report.get("faults"),
    }


def _screen(s: dict[str, Any]) -> str:
    statuses = ", ".join(f"{k} {v}" for k, v in s["statuses"].items())
    refusals = ", ".join(f"{k} {v}" for k, v in s["refusals"].items()) or "none"
    return "\n".join(
        [
            "ForkGate demo — embedded certd (SQLite ledger) on " + s["server"],
            f"  tasks                {s['tasks']} Countdown puzzles (4 numbers)",
            f"  responses verified   {s['responses']}: {statuses}",
            f"  certify requests     {s['certify_requests']}: {s['labels_certified']} labels "
            "certified, "
            f"refused: {refusals}",
            f"  families certified   {s['families_certified']} of "
            f"{s['families_feasible']} feasible, {s['families_certifiable_together']} "
            "certifiable together "
            f"(coverage {s['coverage']:.1%})",
            f"  ledger               {s['ledger_size']} entries",
            f"  audit over gRPC      {'OK' if s['audit_over_grpc']['ok'] else 'FAILED'}",
            f"  audit of the files   {'OK' if s['audit_offline']['ok'] else 'FAILED'}",
            f"  report               {s['workdir']}/summary.json ({s['seconds']} s)",
        ]
    )
