"""The guard loop and ``forkgate guard`` against a real certd on loopback.

The policy is ``forkgate.jobs.scripted.ScriptedModel`` (a callable sampler whose checkpoints differ
in route shares and skill, so the loop's dynamics are exact and fast; the embedded Countdown
policy runs the acceptance flow in test_acceptance_embedded.py). certd verifies every sample.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from certd.signing.keys import SigningKey
from forkgate import CertdClient
from forkgate.acceptance import register_task_set
from forkgate.cli import main
from forkgate.guard import Mode, RecoveryController
from forkgate.jobs.guard_demo import OTHER, TARGET, distinct_puzzles, run_guard_loop
from forkgate.jobs.scripted import ScriptedModel
from forkgate.ratchet import CheckpointRatchet

BANDS = {
    TARGET: distinct_puzzles(32, numbers=3, seed=1, target_range=(10, 200)),
    OTHER: distinct_puzzles(32, numbers=4, seed=2),
}


@pytest.fixture()
def client(address: str, vkey: str) -> Any:
    with CertdClient(address, trusted_keys=[vkey]) as c:
        for name, tasks in BANDS.items():
            register_task_set(
                c, name, tasks, k=8, tolerance_best_at_k=0.10,
                route_kappa="countdown.first-op.v1", route_field="operator",
            )  # fmt: skip
        yield c


def _loop(client: CertdClient, vkey: str, controller: RecoveryController, phases: int, **kw: Any):
    ratchet = CheckpointRatchet(
        [vkey], run="guard-demo", consistency=lambda a, b: client.consistency_proof(a, b).hashes
    )
    policy = ScriptedModel.from_certd(client, BANDS)
    results, tracker = run_guard_loop(
        client, policy, BANDS, phases=phases, controller=controller, ratchet=ratchet, **kw
    )
    return results, tracker, ratchet


def test_recovery_loop_stops_switching_within_its_bound(client: CertdClient, vkey: str) -> None:
    # Every normal phase collapses band-4's routes and every recovery phase restores them:
    # without a switch budget the loop would flip modes for ever.
    controller = RecoveryController(
        enter_below=0.72, exit_above=0.78, min_dwell_steps=1, max_switches=3
    )
    results, tracker, ratchet = _loop(client, vkey, controller, 10, erode=1.0, restore=1.0)
    assert len(controller.switches) == 3 and controller.exhausted
    last = controller.switches[-1].step
    assert all(r.mode is controller.mode for r in results if r.phase >= last)
    modes = [r.mode for r in results]
    assert Mode.RECOVERY in modes and Mode.NORMAL in modes
    # erosion was real, measured on the trainer side and caught by certd
    eroded = [r for r in results if r.rows[OTHER].ser is not None and r.rows[OTHER].ser.low > 0]
    assert eroded, [r.rows[OTHER].ser for r in results]
    refused = [r for r in results if not r.accepted]
    assert any("CAPABILITY_FELL" in r.refusal and "band-4" in r.refusal for r in refused)
    # only accepted checkpoints were promoted, in chain order
    promoted = [c.checkpoint for c in ratchet.promoted]
    assert promoted == [r.checkpoint for r in results if r.accepted]
    assert [c.sequence for c in ratchet.promoted] == list(range(len(promoted)))
    # first-token divergence from the reference grows with the route collapse
    collapsed = max(tracker.rows, key=lambda r: r.figures.routes.get("/", 0.0))
    assert collapsed.task == OTHER and (collapsed.first_token_jsd or 0.0) > 0.2


def test_guard_cli_prints_the_support_table(
    client: CertdClient, vkey: str, address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    controller = RecoveryController(enter_below=0.72, exit_above=0.78, max_switches=2)
    results, _, _ = _loop(client, vkey, controller, 3, erode=1.0, restore=1.0)
    assert [r.accepted for r in results][:2] == [True, False]
    capsys.readouterr()
    out_dir = tmp_path / "report"
    code = main(
        ["guard", "--server", address, "--run", "guard-demo", "--tasks", OTHER,
         "--trust", vkey, "--out", str(out_dir)]
    )  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0, text
    assert "REFUSE" in text and "CAPABILITY_FELL" in text and "band-4" in text
    assert " band-3 " not in text  # filtered to --tasks
    assert "step-0: certificate OK" in text
    data = json.loads((out_dir / "support.json").read_text())
    assert {r["task"] for r in data["rows"]} == {OTHER}
    assert (out_dir / "support_routes.png").read_bytes().startswith(b"\x89PNG")
    assert set(json.loads((out_dir / "support_routes.json").read_text())["routes"]) <= set("+-*/")

    assert main(["guard", "--server", address, "--run", "guard-demo", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert [d["accepted"] for d in obj["decisions"]][:2] == [True, False]

    stranger = SigningKey.generate("stranger.example/log").verifier().to_vkey()
    trusting = ["guard", "--server", address, "--run", "guard-demo", "--trust", stranger]
    assert main(trusting) == 1  # the accepted step's certificate does not verify
    assert "certificate does NOT verify" in capsys.readouterr().out
    assert main(["guard", "--server", address, "--run", "guard-demo", "--tasks", "nope"]) == 2
    assert main(["guard", "--server", address, "--run", "no-such-run"]) == 2
    assert "no acceptance decision" in capsys.readouterr().err


def test_run_report_gains_support_and_route_plots(
    client: CertdClient, vkey: str, tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib", reason="the report needs the train extra")
    from test_run_report import _synthetic_data, rendered_images

    from forkgate.jobs.report import plot_names, write_report
    from forkgate.jobs.support_report import write_support_report

    controller = RecoveryController(enter_below=0.72, exit_above=0.78, max_switches=2)
    _, tracker, _ = _loop(client, vkey, controller, 3, erode=1.0, restore=1.0)
    [support_json, *_] = write_support_report(tmp_path / "support", tracker.rows)
    data = {**_synthetic_data(), "support": json.loads(support_json.read_text())}
    index = write_report(tmp_path / "report", data)
    assert {"support_best_at_k", "support_routes"} <= set(plot_names(data))
    routes = json.loads((index.parent / "support_routes.json").read_text())
    assert routes[OTHER]["step-100"]["/"] > 0.7  # the collapse is what the plot shows
    _page, images = rendered_images(index.parent, tmp_path)
    widths = dict(images)
    assert widths["support_best_at_k.png"] > 0 and widths["support_routes.png"] > 0
