"""The support guard end to end: train on one Countdown band, catch erosion of the other.

Example::

    forkgate guard-demo --workdir out/guard --phases 8

It starts ``certd serve`` on a fresh data dir, registers two task sets (3-number and 4-number
Countdown puzzles) and runs a training loop of a scripted policy (``forkgate.jobs.scripted``)
that is trained to improve the 3-number band. Each phase the loop

1. measures support on both bands on the trainer side (samples verified by certd through
   ``VerifyBatch``; ``forkgate.support``), with first-token JSD against the first checkpoint;
2. feeds the guards: ``SupportAlarm`` (pass@1 up, best@k down, per band and for ``all``: the
   mean pass@1 against the worst band's best@k), ``RecoveryController``
   on the 4-number band's best@k, ``SupportMixer`` for the next phase's data mix;
3. asks certd for an acceptance certificate and promotes the checkpoint only through the
   ``CheckpointRatchet``.

In normal mode training moves the 4-number band's openings towards a shortcut route that few of
its tasks admit (the mechanism of the research note: route drift erodes support); in recovery
mode the 4-number band gets data again (the mixer's weight) and its routes drift back. The
printed table is the same as ``forkgate guard`` prints from certd.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from certd.v1 import tasks_pb2

from .._base import VerifyItem
from ..acceptance import list_acceptances, promote_checkpoint, register_task_set
from ..client import CertdClient
from ..errors import InvalidRequestError, PromotionRefusedError
from ..guard import Mode, RecoveryController, SupportAlarm, SupportMixer
from ..local import LocalCertd
from ..puzzles import countdown_puzzles
from ..ratchet import CheckpointRatchet
from ..support import SupportRow, SupportTracker, format_table, route_of
from .scripted import ScriptedCheckpoint, ScriptedModel, blend
from .support_report import decisions_table, write_support_report

__all__ = [
    "BALANCED",
    "PhaseResult",
    "SHORTCUT",
    "distinct_puzzles",
    "measure",
    "run_guard_demo",
    "run_guard_loop",
]

BALANCED = {"+": 0.3, "-": 0.3, "*": 0.3, "/": 0.1}
SHORTCUT = {"/": 0.9, "+": 0.04, "-": 0.03, "*": 0.03}
TARGET, OTHER = "band-3", "band-4"


def distinct_puzzles(
    n: int, *, numbers: int, seed: int, target_range: tuple[int, int] = (10, 999)
) -> list[dict[str, Any]]:
    """``n`` Countdown puzzles, no two the same task (a task set holds each task once)."""
    out: dict[str, dict[str, Any]] = {}
    draw = n
    while len(out) < n:
        draw *= 2
        for p in countdown_puzzles(draw, numbers=numbers, seed=seed, target_range=target_range):
            out.setdefault(json.dumps([sorted(p["numbers"]), p["target"]]), p)
    return list(out.values())[:n]


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """One phase of the guard loop."""

    phase: int
    checkpoint: str
    mode: Mode
    rows: dict[str, SupportRow]
    mix: dict[str, float]
    accepted: bool
    refusal: str = ""
    alarms: tuple[str, ...] = ()


def measure(
    client: CertdClient,
    policy: ScriptedModel,
    ckpt: ScriptedCheckpoint,
    bands: Mapping[str, Sequence[Mapping[str, Any]]],
    tracker: SupportTracker,
) -> dict[str, SupportRow]:
    """Sample k per task of every band, verify through certd, and record support rows.

    Raises:
        ForkgateError: a certd call failed.
    """
    rows = {}
    for band, tasks in bands.items():
        items, logprobs, shape = [], [], []
        for t in tasks:
            task = tasks_pb2.Task(
                countdown=tasks_pb2.CountdownTask(numbers=t["numbers"], target=t["target"])
            )
            samples = policy.generate(ckpt, band, task, tracker.k)
            shape.append(len(samples))
            for s in samples:
                items.append(VerifyItem(task, s.text))
                logprobs.append(s.first_token_logprobs or {})
        verdicts = client.verify_batch_pb(items)
        correct, at = [], 0
        for n in shape:
            correct.append([v.status == tasks_pb2.CORRECT for v in verdicts[at : at + n]])
            at += n
        rows[band] = tracker.observe(
            ckpt.name,
            band,
            correct,
            routes=[route_of(v, "countdown.first-op.v1", "operator") for v in verdicts],
            families=[v.family.value or "none" for v in verdicts],
            prompt_ids=[json.dumps(t, sort_keys=True) for t in tasks],
            first_token_logprobs=logprobs,
        )
    return rows


@dataclass
class _Dynamics:
    """The scripted effect of a phase of training on the policy."""

    skill: dict[str, float] = field(default_factory=lambda: {TARGET: 0.25, OTHER: 0.35})
    drift: float = 0.0  # 0: the other band's routes balanced; 1: all on the shortcut

    def checkpoint(self, phase: int) -> ScriptedCheckpoint:
        return ScriptedCheckpoint(
            f"step-{100 * phase}",
            {TARGET: BALANCED, OTHER: blend(BALANCED, SHORTCUT, self.drift)},
            dict(self.skill),
        )

    def train(self, mode: Mode, mix: Mapping[str, float], erode: float, restore: float) -> None:
        if mode is Mode.NORMAL:
            self.skill[TARGET] = min(0.9, self.skill[TARGET] + 0.15 * mix[TARGET] / 0.5)
            self.drift = min(1.0, self.drift + erode)
        else:
            self.drift = max(0.0, self.drift - restore * mix[OTHER] / 0.5)


def run_guard_loop(
    client: CertdClient,
    policy: ScriptedModel,
    bands: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    phases: int,
    controller: RecoveryController,
    ratchet: CheckpointRatchet,
    run: str = "guard-demo",
    k: int = 8,
    erode: float = 0.35,
    restore: float = 0.5,
) -> tuple[list[PhaseResult], SupportTracker]:
    """Run the scripted training loop with the guards; see the module docstring.

    Args:
        client: the certd client.
        policy: the scripted policy.
        bands: task set name → tasks (registered with certd under the same names).
        phases: how many phases (checkpoints).
        controller: the recovery controller, fed the other band's best@k.
        ratchet: promotes accepted checkpoints.
        run: the acceptance run name.
        k: the budget of the trainer-side measurements.
        erode: how far one normal phase moves the other band's routes to the shortcut.
        restore: how far one recovery phase (at an even mix) moves them back.

    Raises:
        ForkgateError: a certd call failed.

    Returns:
        The phases and the tracker with every support row.
    """
    tracker = SupportTracker(k=k, resamples=1000)
    alarm = SupportAlarm(min_rise=0.0, min_fall=0.05)
    mixer = SupportMixer({TARGET: 0.5, OTHER: 0.5}, gain=4.0, min_weight=0.1)
    dyn = _Dynamics()
    out: list[PhaseResult] = []
    mix = {TARGET: 0.5, OTHER: 0.5}
    for phase in range(phases):
        ckpt = dyn.checkpoint(phase)
        rows = measure(client, policy, ckpt, bands, tracker)
        alarms = _alarms(alarm, phase, rows)
        mode = controller(phase, rows[OTHER].figures.best_at_k)
        ser = {b: r.ser.estimate for b, r in rows.items() if r.ser is not None}
        mix = mixer(ser) if mode is Mode.RECOVERY else {TARGET: 0.5, OTHER: 0.5}
        accepted, refusal = _promote(client, ratchet, policy, ckpt, run)
        out.append(PhaseResult(phase, ckpt.name, mode, rows, mix, accepted, refusal, alarms))
        dyn.train(mode, mix, erode, restore)
    return out, tracker


def _alarms(alarm: SupportAlarm, phase: int, rows: Mapping[str, SupportRow]) -> tuple[str, ...]:
    """The alarms per task, and across tasks: mean pass@1 against the worst task's best@k."""
    watched = {b: (r.figures.pass_at_1, r.figures.best_at_k) for b, r in rows.items()}
    watched["all"] = (
        sum(p for p, _ in watched.values()) / len(watched),
        min(b for _, b in watched.values()),
    )
    return tuple(
        a.reason
        for name, (p1, bk) in watched.items()
        if (a := alarm(phase, name, pass_at_1=p1, best_at_k=bk))
    )


def _promote(
    client: CertdClient,
    ratchet: CheckpointRatchet,
    model: ScriptedModel,
    ckpt: ScriptedCheckpoint,
    run: str,
) -> tuple[bool, str]:
    """Ask certd to accept the checkpoint against the target band: (accepted, refusal)."""
    try:
        promote_checkpoint(
            client,
            ratchet,
            model.sampler(ckpt),
            run=run,
            checkpoint=ckpt.name,
            checkpoint_digest=ckpt.digest,
            target=TARGET,
        )
    except PromotionRefusedError as e:
        return False, f"{e.reason}: {e}"
    return True, ""


def run_guard_demo(
    workdir: Path,
    *,
    phases: int = 8,
    tasks: int = 64,
    seed: int = 0,
    as_json: bool = False,
    server: str = "",
    trust: str = "",
) -> int:
    """Run the demo; return 0 when erosion was caught (a refusal) and the loop settled.

    With ``server`` (and its log key ``trust``) the demo runs against that certd, so that
    ``forkgate guard --server … --run guard-demo`` can read its decisions afterwards; without,
    it starts its own under ``workdir/certd-data``.
    """
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    bands = {
        TARGET: distinct_puzzles(tasks, numbers=3, seed=seed + 1, target_range=(10, 200)),
        OTHER: distinct_puzzles(tasks, numbers=4, seed=seed + 2),
    }
    if server and not trust:
        raise InvalidRequestError("--trust is required with --server", field="trust")
    local = contextlib.nullcontext(None) if server else LocalCertd(workdir / "certd-data")
    with local as certd:
        address = certd.address if certd is not None else server
        vkey = certd.vkey if certd is not None else trust
        with CertdClient(address, trusted_keys=[vkey]) as client:
            _register(client, bands)
            policy = ScriptedModel.from_certd(client, bands, seed=seed)
            controller = RecoveryController(
                enter_below=0.72, exit_above=0.78, min_dwell_steps=2, max_switches=4
            )
            ratchet = CheckpointRatchet(
                [vkey],
                run="guard-demo",
                consistency=lambda a, b: client.consistency_proof(a, b).hashes,
            )
            results, tracker = run_guard_loop(
                client, policy, bands, phases=phases, controller=controller, ratchet=ratchet
            )
            decisions = list_acceptances(client, "guard-demo")
    files = write_support_report(workdir, tracker.rows, decisions)
    summary = _summary(workdir, results, controller, ratchet, files)
    if as_json:
        print(json.dumps(summary))
    else:
        _print_report(summary, results, tracker, decisions, controller)
    sys.stdout.flush()
    return 0 if summary["erosion_caught"] else 1


def _summary(
    workdir: Path,
    results: Sequence[PhaseResult],
    controller: RecoveryController,
    ratchet: CheckpointRatchet,
    files: Sequence[Path],
) -> dict[str, Any]:
    """The demo's JSON summary: phases, switches, promotions, whether erosion was caught."""
    caught = any(not r.accepted and "CAPABILITY_FELL" in r.refusal for r in results)
    return {
        "workdir": str(workdir),
        "phases": [
            {
                "checkpoint": r.checkpoint,
                "mode": r.mode.value,
                "accepted": r.accepted,
                "refusal": r.refusal,
                "alarms": list(r.alarms),
                "mix": r.mix,
            }
            for r in results
        ],
        "switches": [(s.step, s.to.value) for s in controller.switches],
        "promoted": [c.checkpoint for c in ratchet.promoted],
        "erosion_caught": caught,
        "files": [str(f) for f in files],
    }


def _register(client: CertdClient, bands: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
    """Register each band as a task set of the acceptance policy (k 8, tolerances 0.10)."""
    for name, ts in bands.items():
        register_task_set(
            client,
            name,
            ts,
            k=8,
            tolerance_best_at_k=0.10,
            tolerance_pass_at_1=0.10,
            route_kappa="countdown.first-op.v1",
            route_field="operator",
        )


def _print_report(
    summary: Mapping[str, Any],
    results: Sequence[PhaseResult],
    tracker: SupportTracker,
    decisions: Sequence[Any],
    controller: RecoveryController,
) -> None:
    """The demo's screen: the trainer-side table, certd's decisions, the guard loop."""
    print("== trainer-side support (forkgate.support; samples verified by certd) ==")
    print(format_table(tracker.rows))
    print()
    print("== certd acceptance decisions (what `forkgate guard` prints) ==")
    print(decisions_table(decisions))
    print()
    print("== guard loop ==")
    for r in results:
        verdict = "ACCEPTED" if r.accepted else "REFUSED "
        mix = " ".join(f"{b}:{w:.2f}" for b, w in r.mix.items())
        print(f"{r.checkpoint:<9} mode={r.mode.value:<8} {verdict} next-mix {mix}")
        for a in r.alarms:
            print(f"          ALARM {a}")
        if r.refusal:
            print(f"          {r.refusal}")
    print(
        f"switches {summary['switches']} (max {controller.max_switches}, "
        f"exhausted={controller.exhausted}); promoted {summary['promoted']}"
    )
    print(
        f"erosion caught: {summary['erosion_caught']}; report files: {', '.join(summary['files'])}"
    )
