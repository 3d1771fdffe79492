"""``certd kappa-fit``: the operator fits the learned κ on trusted rollouts and records it.

Example::

    certd kappa-fit --config certd.json --rollouts trusted.jsonl --json

Each line of ``--rollouts`` is ``{"task": <task object>, "responses": ["…", …]}`` (or one
``"response"`` per line; lines of one task are pooled). For every task that a
``learned_kappa.task_sets`` entry chooses the learned κ for, the rollouts are verified, the
first steps of the CORRECT ones clustered, and the model recorded in the ledger as a signed
``kappa-model`` statement (``certd.authority.kappa_models``). A task with a model keeps it.
With the embedded SQLite ledger, run it while certd is stopped; a Redis cluster's ledger may
be written while replicas run (they read a record when they first need it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from certd.clihelp import add_verb, emit
from certd.errors import InvalidInputError

__all__ = ["add_parser"]


def _read(path: str) -> list[str]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text("utf-8")
    except FileNotFoundError as e:
        raise InvalidInputError(f"{path}: no such file", field="rollouts") from e
    except OSError as e:
        raise InvalidInputError(f"cannot read {path}: {e.strerror}", field="rollouts") from e
    return text.splitlines()


def _cmd_kappa_fit(args: argparse.Namespace) -> int:
    from certd.authority.checker import Checkers
    from certd.authority.kappa_models import checked_from_object, read_rollouts, record_models
    from certd.authority.labeller import LearnedLabeller
    from certd.config import load_config
    from certd.service.convert import checked_task
    from certd.service.server import ensure_key, open_ledger

    cfg = load_config(args.config, data_dir=args.data_dir, listen=None)
    if not cfg.data_dir.is_dir():  # a typo must not start a new log under a new key
        raise InvalidInputError(
            f"{cfg.data_dir}: no such directory (the data dir of the log to record in)",
            field="data_dir",
        )
    rows = read_rollouts(_read(args.rollouts), args.rollouts)
    labeller = LearnedLabeller.from_config(cfg)
    if labeller is None:
        raise InvalidInputError(
            "learned_kappa.task_sets: no task set chooses the learned κ in this config",
            field="config",
        )
    key = ensure_key(cfg.key_path, cfg.key_name)
    checkers = Checkers(cfg)
    try:
        with open_ledger(cfg, key) as ledger:

            def verify(task: Any) -> Any:
                checker = checkers.for_domain(task.domain)
                checker.wait_ready(args.ready_wait_s)  # an offline run may start before math
                return lambda rs: [
                    v.status for v in checker.verify_batch([(task.value, r) for r in rs])
                ]

            out = record_models(
                rows,
                labeller=labeller,
                checked=lambda obj: checked_from_object(obj, lambda pb: checked_task(pb, cfg)),
                verify=verify,
                ledger=ledger,
                signer=key,
            )
    finally:
        checkers.close()
    lines = [
        f"{r['task_digest'][:16]}… {r['kappa']}: "
        f"{'kept the model at' if r['existing'] else 'recorded at'} ledger index "
        f"{r['ledger_index']} ({len(r['cluster_sizes'])} clusters, sizes {r['cluster_sizes']})"
        for r in out
    ]
    emit(args, {"models": out}, "\n".join(lines))
    return 0


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``kappa-fit``."""
    f = add_verb(
        sub,
        "kappa-fit",
        "fit the learned κ on trusted rollouts and record each question's model in the ledger",
        "0 recorded (or kept), 2 a bad config, rollouts file or data dir, or too few correct "
        "rollouts, 3 the ledger store unreachable",
        _cmd_kappa_fit,
    )
    f.add_argument("--rollouts", required=True, help="JSONL of {task, responses} ('-': stdin)")
    f.add_argument("--config", type=Path, default=None, help="certd's JSON config")
    f.add_argument("--data-dir", type=Path, default=None, help="data dir (default ./certd-data)")
    f.add_argument(
        "--ready-wait-s",
        type=float,
        default=300.0,
        help="how long to wait for a domain's checker to warm up (default 300)",
    )
    return f
