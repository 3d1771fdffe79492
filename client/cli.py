"""The ``forkgate`` command line: run, experiment, verify-batch, certify, check-cert, get-cert, ….

Example::

    forkgate verify-batch --server 127.0.0.1:50051 --in rollouts.jsonl --out verdicts.jsonl
    forkgate certify --server 127.0.0.1:50051 \\
        --task '{"domain":"countdown","task":{"numbers":[25,5,4,3],"target":83}}' \\
        --label 25,- --witness '(25-5)*4+3' --out cert.json
    forkgate check-cert cert.json --trust certd-data/signing.pub
    forkgate guard --server 127.0.0.1:50051 --run run-1 --tasks band-3,band-4 --trust KEY

Exit codes (``certd.exitcodes``, docs/exit-codes.md): 0 all good; 1 something was refused or
failed verification (``admit`` with a refused record unless ``--allow-refused``, ``check-cert``
on a certificate that does not verify, ``guard`` with a certificate that does not verify);
2 usage or unreadable input; 3 certd unavailable.

verify-batch input lines are ``{"id", "domain", "task", "response", …}`` (``domain``
required); each output line is the input object unchanged plus ``status``, ``reward``,
``family``, ``kappa``, ``initiated``, ``labels``, ``detail``, ``verifier``, ``elapsed_ms``
(docs/formats.md §9). A bad line gives an ``"status": "ERROR"`` line with its file line
number, never a crash. Every user error is one line and an exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from certd.clihelp import finish_parser
from certd.errors import CertdError, MalformedStatementError
from certd.exitcodes import EXIT_INTERRUPTED, EXIT_REFUSED, EXIT_USAGE, exit_code_of
from certd.taskspec import domain_names
from certd.v1 import authority_pb2

from ._channel import ClientSettings
from .cli_admit import add_parser as add_admit_parser
from .cli_admit import default_ratchet_state
from .cli_io import (
    open_in,
    open_in_bytes,
    open_out,
    open_out_bytes,
    task_arg,
    trust_arg,
)
from .cli_metrics import add_parser as add_metrics_parser
from .connection import add_connection_flags, client_from_args
from .errors import ForkgateError, InvalidRequestError, forkgate_exit_code
from .jobs.cli_jobs import cmd_build_forktrees, cmd_guard, cmd_guard_demo, cmd_run
from .verify_jsonl import dumps_line, verdict_line, verify_lines

__all__ = ["default_ratchet_state", "main", "verdict_line", "verify_lines"]


def _cmd_verify_batch(args: argparse.Namespace) -> int:
    from .progress import Progress

    if args.batch_size < 1:
        raise InvalidRequestError(
            f"--batch-size: expected >= 1, got {args.batch_size}", field="batch_size"
        )
    settings = ClientSettings(batch_size=args.batch_size, timeout_s=args.timeout)
    counts: dict[str, int] = {}
    total = 0
    with (
        open_in_bytes(args.input) as source,
        client_from_args(args, trusted_keys=trust_arg(args.trust), settings=settings) as client,
        open_out_bytes(args.out) as sink,
        Progress("verify-batch", unit="lines") as progress,
    ):
        for obj in verify_lines(client, source, args.batch_size, inflight=args.inflight):
            sink.write(dumps_line(obj))
            status = obj["status"]
            counts[status] = counts.get(status, 0) + 1
            total += 1
            if total % 1000 == 0:
                progress.update(1000)
        progress.update(total % 1000)
    summary = {"lines": total, "statuses": counts, "out": args.out}
    print(
        json.dumps(summary)
        if args.json
        else f"verified {total} lines: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        file=sys.stderr if args.out == "-" else sys.stdout,
    )
    return 0


def _cmd_certify(args: argparse.Namespace) -> int:
    task = task_arg(args.domain, args.task)
    with client_from_args(args, trusted_keys=trust_arg(args.trust)) as client:
        cert = client.certify(task, args.label, args.witness, args.kappa)
    doc = json_format.MessageToDict(cert)
    if args.out:
        with open_out(args.out) as sink:
            sink.write(json.dumps(doc, indent=1) + "\n")
    print(
        json.dumps(doc)
        if args.json
        else f"certified {args.label} at ledger index {cert.ledger_index} "
        f"(id {cert.certificate_id}){' -> ' + args.out if args.out else ''}",
        file=sys.stderr if args.out == "-" else sys.stdout,
    )
    return 0


def _cmd_check_cert(args: argparse.Namespace) -> int:
    from certd.statements import verify_certificate  # signing: only for the verbs that check

    keys = trust_arg(args.trust)
    assert keys is not None  # --trust is required
    cert = authority_pb2.Certificate()
    with open_in(args.file) as f:
        text = f.read()
    try:
        json.loads(text)
    except ValueError as e:  # not JSON at all: an input file of the wrong kind (usage)
        raise InvalidRequestError(f"{args.file}: not JSON: {e}", field="file") from e
    task = task_arg(args.domain, args.task) if args.task else None
    try:
        try:
            json_format.Parse(text, cert)  # duplicate or unknown fields are refused here
        except json_format.ParseError as e:  # JSON, but no certificate: a refusal
            raise MalformedStatementError(f"not a certificate: {e}") from e
        claim = verify_certificate(cert, keys, task=task)
    except CertdError as e:
        reason = type(e).__name__
        print(
            json.dumps({"ok": False, "reason": reason, "error": str(e)})
            if args.json
            else f"certificate does NOT verify ({reason}): {e}"
        )
        return EXIT_REFUSED
    info = {
        "ok": True,
        "task_digest": claim.task_digest,
        "kappa": claim.kappa,
        "label": claim.label,
        "verifier": claim.verifier,
        "ledger_index": claim.ledger_index,
        "tree_size": claim.tree_size,
        "issued_at": claim.issued_at,
    }
    print(
        json.dumps(info)
        if args.json
        else f"certificate OK: {claim.kappa} label {claim.label} "
        f"for task {claim.task_digest[:16]}…, "
        f"ledger index {claim.ledger_index} in a checkpoint of size {claim.tree_size}"
    )
    return 0


def _cmd_experiment(args: argparse.Namespace) -> int:
    from .jobs.experiment import KEY_ARMS, ExperimentOptions, run_experiment

    opts = ExperimentOptions(
        workdir=Path(args.workdir),
        arms=tuple(args.arm) if args.arm else KEY_ARMS,
        seeds=tuple(args.seed) if args.seed else (0, 1, 2, 3, 4),
        steps=args.steps,
        tasks=args.tasks,
        prompts_per_step=args.prompts_per_step,
        group_size=args.group_size,
        eval_tasks=args.eval_tasks,
        eval_n=args.eval_n,
        eval_every=args.eval_every,
        lr=args.lr,
        forktree_tasks=args.forktree_tasks,
        forktree_budget=args.forktree_budget,
        pool_n=args.pool_n,
        sft_steps=args.sft_steps,
        forced_n=args.forced_n,
        free_n=args.free_n,
        max_pairs=args.max_pairs,
        threads=args.threads,
        frontier=args.frontier,
        interp_alphas=tuple(args.interp_alpha) if args.interp_alpha else (0.25, 0.5, 0.75),
    )
    return run_experiment(opts, as_json=args.json)


_SAMPLERS = ["embedded", "openai", "transformers", "vllm"]


def _add_verify_batch(sub: Any) -> argparse.ArgumentParser:
    v: argparse.ArgumentParser = sub.add_parser(
        "verify-batch", help="verify a JSONL file of responses through certd"
    )
    add_connection_flags(v)
    v.add_argument(
        "--in",
        dest="input",
        required=True,
        help='input JSONL, one {"id", "domain", "task", "response", …} a line (\'-\' for stdin)',
    )
    v.add_argument("--out", required=True, help="output JSONL ('-' for stdout)")
    v.add_argument("--batch-size", type=int, default=1000, help="lines per VerifyBatch call")
    v.add_argument("--timeout", type=float, default=120.0, help="seconds per batch call")
    v.add_argument("--trust", action="append", default=[], help="check receipts with this key")
    v.add_argument(
        "--inflight", type=int, default=4, help="VerifyBatch calls in flight at once (pipelining)"
    )
    v.set_defaults(fn=_cmd_verify_batch)
    return v


def _add_certify(sub: Any) -> argparse.ArgumentParser:
    c: argparse.ArgumentParser = sub.add_parser(
        "certify", help="certify one (task, label, witness)"
    )
    add_connection_flags(c)
    c.add_argument(
        "--domain",
        default="",
        choices=["", *domain_names()],
        help="the task's domain, when --task is the bare task object",
    )
    c.add_argument(
        "--task",
        required=True,
        help='the task as JSON: {"domain": …, "task": {…}} (docs/formats.md), or the bare '
        "task object with --domain",
    )
    c.add_argument("--label", required=True, help="e.g. 25,-")
    c.add_argument("--kappa", default="", help="default: the domain's κ")
    c.add_argument("--witness", required=True)
    c.add_argument("--trust", action="append", default=[])
    c.add_argument("--out", default="", help="write the certificate JSON here ('-': stdout)")
    c.set_defaults(fn=_cmd_certify)
    return c


def _add_check_cert(sub: Any) -> argparse.ArgumentParser:
    k: argparse.ArgumentParser = sub.add_parser(
        "check-cert", help="verify a certificate file offline"
    )
    k.add_argument("file", help="the certificate JSON (forkgate certify --out); '-' for stdin")
    k.add_argument("--trust", action="append", required=True, help="trusted log key (vkey or file)")
    k.add_argument("--task", default="", help='also require this task: {"domain": …, "task": {…}}')
    k.add_argument("--domain", default="", help="the domain, when --task is the bare task")
    k.set_defaults(fn=_cmd_check_cert)
    return k


def _add_build_forktrees(sub: Any) -> argparse.ArgumentParser:
    b: argparse.ArgumentParser = sub.add_parser(
        "build-forktrees", help="sample, verify and certify fork trees per task"
    )
    add_connection_flags(b)
    b.add_argument(
        "--tasks",
        required=True,
        help='JSONL, one task object {"domain": …, "task": {…}} a line (\'-\' for stdin)',
    )
    b.add_argument(
        "--sampler", choices=_SAMPLERS, default="embedded", help="embedded: the shipped policy"
    )
    b.add_argument("--model", default="default")
    b.add_argument("--base-url", default="", help="OpenAI-compatible server (openai sampler)")
    b.add_argument("--api-key", default=None)
    b.add_argument("--m", type=int, default=4, help="families wanted per task")
    b.add_argument("--budget", type=int, default=64, help="samples per task at most")
    b.add_argument("--round-size", type=int, default=8)
    b.add_argument(
        "--max-tokens", type=int, default=0, help="0: 80 for the embedded policy, else 256"
    )
    b.add_argument("--temperature", type=float, default=1.0)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--force-prefix", action="store_true", help="force uncovered entries")
    b.add_argument(
        "--prefix-template",
        default="",
        help="forced entry (default: <think>{operand}{operator} embedded, else <answer>…)",
    )
    b.add_argument("--threads", type=int, default=1, help="torch CPU threads (embedded)")
    b.add_argument("--trust", action="append", default=[])
    b.add_argument("--out", required=True, help="JSONL; appended, resumable")
    b.set_defaults(fn=cmd_build_forktrees)
    return b


def _add_guard(sub: Any) -> argparse.ArgumentParser:
    g: argparse.ArgumentParser = sub.add_parser(
        "guard", help="the support table of a run's acceptance decisions"
    )
    add_connection_flags(g)
    g.add_argument("--run", required=True, help="the training run")
    g.add_argument("--tasks", action="append", default=[], help="task sets (comma-separated)")
    g.add_argument("--trust", action="append", default=[], help="verify certificates offline")
    g.add_argument("--out", default="", help="write support.json and SVG plots here")
    g.set_defaults(fn=cmd_guard)
    return g


def _add_guard_demo(sub: Any) -> argparse.ArgumentParser:
    gd: argparse.ArgumentParser = sub.add_parser(
        "guard-demo", help="train on one band, catch erosion of the other"
    )
    gd.add_argument("--workdir", default="out/guard")
    gd.add_argument("--phases", type=int, default=8)
    gd.add_argument("--tasks", type=int, default=64, help="puzzles per band")
    gd.add_argument("--seed", type=int, default=0)
    gd.add_argument(
        "--server", action="append", default=None, help="use this certd (default: start one)"
    )
    gd.add_argument("--trust", action="append", default=[], help="its log key (with --server)")
    gd.set_defaults(fn=cmd_guard_demo)
    return gd


def _add_run(sub: Any) -> argparse.ArgumentParser:
    r: argparse.ArgumentParser = sub.add_parser(
        "run", help="the main job on the embedded default (what `make run` does)"
    )
    r.add_argument("--workdir", default="out/run")
    r.add_argument(
        "--force", action="store_true", help="replace an earlier run in --workdir (when done)"
    )
    r.add_argument("--server", default="", help="use this certd instead of starting one")
    r.add_argument("--trust", action="append", default=[], help="its log key (with --server)")
    r.add_argument("--sampler", choices=_SAMPLERS, default="embedded")
    r.add_argument("--model", default="default", help="model name (vllm, transformers, openai)")
    r.add_argument("--weights", default="", help="embedded policy weights (default: shipped)")
    r.add_argument("--base-url", default="", help="OpenAI-compatible server (openai sampler)")
    r.add_argument("--api-key", default=None)
    r.add_argument("--tasks", type=int, default=48, help="Countdown tasks to generate")
    r.add_argument("--tasks-file", default="", help="JSONL of tasks instead of generating")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--k", type=int, default=16, help="evaluation samples per task (EC@K)")
    r.add_argument("--m", type=int, default=4, help="families wanted per fork tree")
    r.add_argument("--budget", type=int, default=48, help="fork-tree samples per task")
    r.add_argument("--round-size", type=int, default=16)
    r.add_argument("--max-tokens", type=int, default=0, help="default: 80 embedded, else 512")
    r.add_argument("--temperature", type=float, default=1.0)
    r.add_argument("--top-p", type=float, default=1.0)
    r.add_argument("--prefix-template", default="", help="forced entry (default per sampler)")
    r.add_argument("--threads", type=int, default=1, help="torch CPU threads (embedded)")
    r.set_defaults(fn=cmd_run)
    return r


def _add_experiment(sub: Any) -> argparse.ArgumentParser:
    """``experiment`` and its one verb ``countdown`` (returned: the verb takes ``--json``)."""
    x = sub.add_parser("experiment", help="the mechanism experiment (GRPO arms on CPU)")
    xs = x.add_subparsers(dest="experiment", required=True)
    xc: argparse.ArgumentParser = xs.add_parser(
        "countdown", help="GRPO arms with entry-level protection, paired seeds"
    )
    xc.add_argument("--workdir", default="out/experiment", help="results.jsonl (resumable)")
    xc.add_argument("--arm", action="append", default=[], help="arm spec (name or name@weight)")
    xc.add_argument("--seed", action="append", type=int, default=[], help="default: 0..4")
    # The defaults are issue 18's protocol; docs/results/exp18/run*.sh pass the reduced sizes.
    xc.add_argument("--steps", type=int, default=200, help="GRPO steps per run")
    xc.add_argument("--tasks", type=int, default=256, help="training tasks")
    xc.add_argument("--prompts-per-step", type=int, default=8)
    xc.add_argument("--group-size", type=int, default=16, help="rollouts per prompt")
    xc.add_argument("--eval-tasks", type=int, default=256)
    xc.add_argument("--eval-n", type=int, default=32, help="samples per held-out task")
    xc.add_argument("--eval-every", type=int, default=0, help="0: start and end only")
    xc.add_argument("--lr", type=float, default=2e-4)
    xc.add_argument("--forktree-tasks", type=int, default=128, help="tasks with fork trees")
    xc.add_argument("--forktree-budget", type=int, default=32, help="samples per fork tree")
    xc.add_argument("--pool-n", type=int, default=8, help="samples per task, unbalanced pool")
    xc.add_argument("--sft-steps", type=int, default=40, help="fork-tree SFT steps (sft+grpo)")
    xc.add_argument("--forced-n", type=int, default=8, help="forced samples per pair")
    xc.add_argument(
        "--free-n", type=int, default=64, help="free samples per pair (0: the first runs' way)"
    )
    xc.add_argument("--max-pairs", type=int, default=48, help="intervention pairs at most")
    xc.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    xc.add_argument(
        "--frontier", action="store_true",
        help="issue 33: evaluations every --eval-every steps on the multi-family held-out tasks; "
        "grpo keeps checkpoints and evaluates weight interpolations toward the start",
    )  # fmt: skip
    xc.add_argument("--interp-alpha", action="append", type=float, default=[],
                    help="interpolation weights α (default 0.25, 0.5, 0.75)")  # fmt: skip
    xc.set_defaults(fn=_cmd_experiment)
    return xc


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``forkgate``: one ``_add_…`` per verb, in ``--help`` order."""
    from .cli_certs import add_parsers as add_cert_parsers
    from .jobs.kappa_calibrate import add_parser as add_kappa_calibrate  # stdlib-only at import

    p = argparse.ArgumentParser(prog="forkgate", description="ForkGate trainer-side tools")
    sub = p.add_subparsers(dest="command", required=True)
    verbs = [
        add(sub)
        for add in (
            _add_verify_batch,
            _add_certify,
            _add_check_cert,
            _add_build_forktrees,
            add_admit_parser,
            add_metrics_parser,
            _add_guard,
            _add_guard_demo,
            _add_run,
            _add_experiment,
        )
    ]
    add_kappa_calibrate(sub)
    for cmd in (*verbs, *add_cert_parsers(sub)):
        cmd.add_argument("--json", action="store_true", help="machine-readable output")
    finish_parser(p, version=True)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status (130 on Ctrl-C, with one line on stderr)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("forkgate: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except ForkgateError as e:
        print(f"forkgate: error: {e}", file=sys.stderr)
        return forkgate_exit_code(e)
    except CertdError as e:
        print(f"forkgate: error: {e}", file=sys.stderr)
        return exit_code_of(e)
    except (OSError, ValueError) as e:
        print(f"forkgate: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())
