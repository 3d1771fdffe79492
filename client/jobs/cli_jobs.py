"""The ``forkgate`` verbs that run jobs: build-forktrees, run, guard, guard-demo (and the
sampler their flags choose). ``client/cli.py`` builds the parser and dispatches here.

Example::

    forkgate build-forktrees --server 127.0.0.1:50051 --tasks tasks.jsonl --force-prefix \\
        --out forktrees.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from certd.errors import CertdError

from ..cli_io import read_jsonl, trust_arg
from ..connection import client_from_args
from ..errors import InvalidRequestError

__all__ = ["cmd_build_forktrees", "cmd_guard", "cmd_guard_demo", "cmd_run"]


def _sampler(args: argparse.Namespace) -> Any:
    from ..samplers import (
        OpenAICompletionsSampler,
        TransformersSampler,
        VLLMSampler,
    )
    from .embedded import EmbeddedSampler

    if args.sampler == "embedded":
        import torch

        # One thread: the tiny model gains nothing from more, and on a shared machine
        # oversubscribed torch threads spin (20x slower measured on a loaded 2-core box).
        torch.set_num_threads(max(1, getattr(args, "threads", 1)))
        return EmbeddedSampler(getattr(args, "weights", None) or None)

    if args.sampler == "openai":
        if not args.base_url:
            raise InvalidRequestError(
                "--base-url is required for --sampler openai", field="base_url"
            )
        return OpenAICompletionsSampler(args.base_url, args.model, api_key=args.api_key)
    if args.sampler == "vllm":
        return VLLMSampler(args.model)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(args.model)
        tokenizer = AutoTokenizer.from_pretrained(args.model)
    except (OSError, ValueError) as e:  # Hugging Face's own multi-line message stays out
        raise InvalidRequestError(
            f"--model {args.model}: not a model directory or Hugging Face model id "
            f"this machine can load ({type(e).__name__})",
            field="model",
        ) from e
    return TransformersSampler(model, tokenizer)


def _prefix_template(args: argparse.Namespace) -> str:
    """The forced entry: the flag, or the one that fits the sampler (the embedded policy
    writes its entry after ``<think>``, a chat model after ``<answer>``)."""
    tag = "<think>" if args.sampler == "embedded" else "<answer>"
    return str(args.prefix_template) or tag + "{operand}{operator}"


def cmd_build_forktrees(args: argparse.Namespace) -> int:
    from ..forktree import ForkTreeBuilder

    tasks = read_jsonl(args.tasks)
    with client_from_args(args, trusted_keys=trust_arg(args.trust)) as client:
        builder = ForkTreeBuilder(
            client,
            _sampler(args),
            m=args.m,
            budget=args.budget,
            round_size=args.round_size,
            max_tokens=args.max_tokens or (80 if args.sampler == "embedded" else 256),
            temperature=args.temperature,
            force_prefix=args.force_prefix,
            prefix_template=_prefix_template(args),
            seed=args.seed,
        )
        records = builder.run(tasks, Path(args.out))
    found = sum(len(r["families"]) for r in records)
    print(
        json.dumps({"tasks": len(records), "families": found, "out": args.out})
        if args.json
        else f"built {len(records)} fork trees ({found} certified families) -> {args.out}"
    )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .run import RunOptions, run_main_job

    if args.sampler != "embedded" and args.model == "default" and args.sampler != "openai":
        raise InvalidRequestError(
            f"--model is required with --sampler {args.sampler}", field="model"
        )
    prefix = _prefix_template(args)
    opts = RunOptions(
        workdir=Path(args.workdir),
        force=args.force,
        server=args.server,
        trust=args.trust,
        tasks=args.tasks,
        tasks_file=args.tasks_file,
        seed=args.seed,
        k=args.k,
        m=args.m,
        budget=args.budget,
        round_size=args.round_size,
        max_tokens=args.max_tokens or (80 if args.sampler == "embedded" else 512),
        temperature=args.temperature,
        top_p=args.top_p,
        prefix_template=prefix,
        sampler_name=args.sampler if args.sampler == "embedded" else f"{args.sampler} {args.model}",
    )
    return run_main_job(opts, as_json=args.json, make_sampler=lambda: _sampler(args))


def cmd_guard(args: argparse.Namespace) -> int:
    from certd.statements import verify_acceptance

    from ..acceptance import list_acceptances
    from .support_report import (
        decisions_json,
        decisions_table,
        rows_from_decisions,
        write_support_report,
    )

    tasks = [t for arg in args.tasks for t in arg.split(",") if t]
    with client_from_args(args) as client:
        decisions = list_acceptances(client, args.run)
    if tasks:
        known = {f.task_set for d in decisions for f in d.figures}
        unknown = sorted(set(tasks) - known)
        if unknown:
            raise InvalidRequestError(
                f"--tasks: {unknown} not in run {args.run!r} (has {sorted(known)})", field="tasks"
            )
        for d in decisions:
            keep = [f for f in d.figures if f.task_set in tasks]
            del d.figures[:]
            d.figures.extend(keep)
    status = 0
    checked: list[str] = []
    if args.trust:
        keys = trust_arg(args.trust)
        assert keys is not None
        for d in decisions:
            if d.accepted:
                try:
                    verify_acceptance(d.certificate, keys, checkpoint_digest=d.checkpoint_digest)
                    checked.append(f"{d.checkpoint}: certificate OK")
                except CertdError as e:
                    checked.append(f"{d.checkpoint}: certificate does NOT verify: {e}")
                    status = 1
    files = []
    if args.out:
        files = write_support_report(Path(args.out), rows_from_decisions(decisions), decisions)
    if args.json:
        print(
            json.dumps(
                {
                    "decisions": decisions_json(decisions),
                    "checked": checked,
                    "files": [str(f) for f in files],
                }
            )
        )
    else:
        print(decisions_table(decisions))
        for line in checked:
            print(line)
        if files:
            print("wrote " + ", ".join(str(f) for f in files))
    return status


def cmd_guard_demo(args: argparse.Namespace) -> int:
    from .guard_demo import run_guard_demo

    server = ",".join(args.server or [])
    trust = args.trust[0] if args.trust else ""
    return run_guard_demo(
        Path(args.workdir),
        phases=args.phases,
        tasks=args.tasks,
        seed=args.seed,
        as_json=args.json,
        server=server,
        trust=trust,
    )
