"""The main job (``forkgate run``, what ``make run`` does): sample, verify, certify, admit, audit.

Example::

    forkgate run                                   # embedded certd and the embedded policy
    forkgate run --sampler vllm --model Qwen/Qwen2.5-3B-Instruct --tasks 256   # on a GPU

Steps, each with its progress (a bar on a terminal, a log line every few seconds otherwise):

1. Start ``certd serve`` on a fresh data dir in the work dir (or use ``--server``).
2. Generate Countdown tasks (``--tasks`` of them with ``--seed``) or load ``--tasks-file``.
3. Evaluation sampling: K samples per task, verified through certd; per task the feasible
   families (certd's enumerator), EC@K, pass@k for k = 1..K, entry-family counts, entry
   entropy, per-family completion and the first-token entropy.
4. Fork trees (``ForkTreeBuilder``): sample, verify and certify until m families per task,
   forcing the entry prefixes of uncovered families with the leftover budget.
5. Stratified groups keyed by (task, κ) over the evaluation samples, with their advantages
   (``StratifiedAdvantages``), next to the plain per-question GRPO groups.
6. The ratchet admits the fork-tree records whose certificates verify offline.
7. Audit the ledger over gRPC and, for the embedded server, from its files.
8. Write the report (HTML, PNG plots, JSON) and print a one-screen summary.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from certd.v1 import tasks_pb2

from ..client import CertdClient
from ..coverage_metrics import ec_at_k_counts, family_correct_counts
from ..errors import InvalidRequestError
from ..forktree import ForkTreeBuilder, countdown_prompt
from ..local import LocalCertd
from ..metrics import entry_entropy, first_token_entropy, pass_at_k
from ..progress import Progress
from ..puzzles import small_countdown_puzzles
from ..samplers import Sample, Sampler
from ..signed_counts import SignedCounts, signed_counts
from ..tasks import as_task
from .run_summary import Measured, report_data, screen
from .solutions import canonical_solution

__all__ = [
    "RunOptions",
    "check_workdir",
    "entry_of",
    "evaluate_tasks",
    "group_stats",
    "run_main_job",
    "staged_workdir",
]

KAPPA = "countdown.first-op.v1"


@dataclass
class RunOptions:
    """What ``forkgate run`` does; the defaults are the embedded default.

    Attributes:
        workdir: everything goes here; an earlier run there is replaced only with ``force``,
            and only once the new run completes.
        force: replace an earlier run in ``workdir``.
        server: a running certd (``host:port``); empty starts one in the work dir.
        trust: the server's log keys (vkey strings or files) when ``server`` is set.
        tasks: how many tasks to generate.
        tasks_file: a JSONL of Countdown tasks instead.
        seed: the seed of tasks and sampling.
        k: evaluation samples per task (EC@K, pass@k).
        m: families wanted per fork tree.
        budget: fork-tree samples per task at most.
        round_size: fork-tree samples per round.
        max_tokens: generation length.
        temperature: sampling temperature.
        top_p: nucleus sampling.
        prefix_template: the forced entry for uncovered families.
        progress: False shows no progress (None or True: a bar on a terminal, periodic
            log lines otherwise).
    """

    workdir: Path = Path("out/run")
    force: bool = False
    server: str = ""
    trust: list[str] = field(default_factory=list)
    tasks: int = 48
    tasks_file: str = ""
    seed: int = 0
    k: int = 16
    m: int = 4
    budget: int = 48
    round_size: int = 16
    max_tokens: int = 80
    temperature: float = 1.0
    top_p: float = 1.0
    prefix_template: str = "<think>{operand}{operator}"
    progress: bool | None = None
    sampler_name: str = "embedded"


def evaluate_tasks(
    client: CertdClient,
    sampler: Sampler,
    tasks: Sequence[Mapping[str, Any]],
    *,
    k: int,
    max_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    progress: bool | None = None,
    ec_k: int | None = None,
) -> list[dict[str, Any]]:
    """K samples per task, verified; one row of coverage figures per task.

    ``progress``: False shows none; otherwise a bar on a terminal, log lines off one.
    ``ec_k``: the K of the row's unbiased ``ec_at_k`` (default ``k``, all the draws).

    Returns:
        Per task: ``task``, ``feasible`` (families), ``samples``, ``correct``,
        ``family_correct`` (feasible family → correct samples), ``solution_counts`` (canonical
        solution → correct samples), ``ec_at_k`` (unbiased, at ``ec_k``),
        ``pass_at_k`` (``{k: value}``), ``entry_counts`` (initiated entry → samples),
        ``entry_entropy``, ``family_completion`` (entry → ``{correct, total}``),
        ``first_token_entropy`` (None when the backend gives no log-probabilities) and
        ``rollouts`` (``[family, reward]`` per sample).
    """
    rows = []
    with Progress("evaluate", unit="tasks", total=len(tasks), enabled=progress is not False) as bar:
        for i, task in enumerate(bar.track(tasks)):
            [group] = sampler.sample(
                [countdown_prompt(task)],
                n=k,
                max_tokens=max_tokens,
                temperature=temperature,
                top_p=top_p,
                seed=seed + 7919 * i,
            )
            rows.append(_task_row(client, task, group, ec_k))
    return rows


def entry_of(v: Any) -> str:
    """The entry a verdict's sample made: the initiated step, else the answer's family.

    Returns:
        The κ label, or ``"(none)"`` when the response wrote neither.
    """
    if v.initiated.value:
        return str(v.initiated.value)
    return str(v.family.value) or "(none)"


def _task_row(
    client: CertdClient, task: Mapping[str, Any], group: Sequence[Sample], ec_k: int | None
) -> dict[str, Any]:
    """One task's samples verified, against its feasible families (certd's enumerator)."""
    enum = client.enumerate_families(task)
    family_of = {
        enum.labels[i].label.value: f
        for f, fam in enumerate(enum.families)
        for i in fam.label_indexes
    }
    feasible = len(enum.families)
    verdicts = client.verify_batch_pb([(task, s.text) for s in group])
    ok = [v.status == tasks_pb2.CORRECT for v in verdicts]
    correct = [v for v, good in zip(verdicts, ok, strict=True) if good]
    entries = [entry_of(v) for v in verdicts]
    completion: dict[str, dict[str, int]] = {}
    for e, good in zip(entries, ok, strict=True):
        fam = completion.setdefault(e, {"correct": 0, "total": 0})
        fam["total"] += 1
        fam["correct"] += good
    firsts = [s.first_token_logprobs for s in group if s.first_token_logprobs]
    ks = [x for x in (1, 2, 4, 8, 16, 32, 64, 128) if x <= len(ok)]
    fam_ok = family_correct_counts(
        str(family_of.get(v.family.value, v.family.value))
        for v, good in zip(verdicts, ok, strict=True)
        if good
    )
    return {
        "task": dict(task),
        "feasible": feasible,
        "samples": len(ok),
        "correct": sum(ok),
        # Labels of one family are one family (the pseudo-fork rule): count families.
        "family_correct": fam_ok,
        "solution_counts": dict(Counter(canonical_solution(v.answer) for v in correct)),
        "ec_at_k": ec_at_k_counts(fam_ok, n=len(ok), k=ec_k or len(ok), feasible=feasible),
        "pass_at_k": {str(x): pass_at_k(len(ok), sum(ok), x) for x in ks},
        "entry_counts": dict(Counter(entries)),
        "entry_entropy": entry_entropy(entries),
        "family_completion": completion,
        "first_token_entropy": first_token_entropy(firsts) if firsts else None,
        "rollouts": [[v.family.value, float(v.reward)] for v in verdicts],
    }


def group_stats(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Plain GRPO groups (per task) against stratified groups (per task and κ family).

    Computes the stratified advantages of all rollouts as one batch (prior 1/2 for every
    family, since no earlier batch exists) and counts the rollouts whose plain group has no
    signal (all rewards equal) but whose stratified advantage is not zero.
    """
    import torch

    from ..advantages import StratifiedAdvantages

    questions, families, rewards = [], [], []
    for n, row in enumerate(rows):
        for fam, reward in row["rollouts"]:
            questions.append(str(n))
            families.append(fam or "(none)")
            rewards.append(reward)
    if not rewards:
        return {"rollouts": 0}
    adv = StratifiedAdvantages()(torch.tensor(rewards), questions, families)
    by_q: dict[str, list[float]] = {}
    for q, r in zip(questions, rewards, strict=True):
        by_q.setdefault(q, []).append(r)
    flat = {q for q, rs in by_q.items() if max(rs) == min(rs)}
    keys = Counter(zip(questions, families, strict=True))
    rescued = sum(
        1 for q, a in zip(questions, adv.tolist(), strict=True) if q in flat and abs(a) > 1e-9
    )
    return {
        "rollouts": len(rewards),
        "grpo_groups": len(by_q),
        "grpo_groups_without_signal": len(flat),
        "stratified_groups": len(keys),
        "stratified_singletons": sum(1 for c in keys.values() if c == 1),
        "mean_abs_stratified_advantage": round(float(adv.abs().mean()), 4),
        "signal_in_flat_grpo_groups": rescued,
    }


_MARKERS = ("summary.json", "experiment.json", "certd-data", "tasks.jsonl")


def check_workdir(path: Path, *, force: bool = False) -> None:
    """Refuse a work dir that holds anything, unless ``force`` and it is an earlier run.

    Nothing is written or deleted here: ``staged_workdir`` builds the new run beside it.

    Raises:
        InvalidRequestError: the folder holds files (without ``force``), or holds something
            other than an earlier run (it is never replaced), or is a file.
    """
    if not path.exists():
        return
    if not path.is_dir():
        raise InvalidRequestError(f"{path} is a file; choose another --workdir", field="workdir")
    if not any(path.iterdir()):
        return
    if not any((path / m).exists() for m in _MARKERS):
        raise InvalidRequestError(
            f"{path} is not empty and holds no earlier run; choose another --workdir",
            field="workdir",
        )
    if not force:
        raise InvalidRequestError(
            f"{path} holds an earlier run (its signing key, ledger and report); pass --force "
            "to replace it, or choose another --workdir",
            field="workdir",
        )


@contextlib.contextmanager
def staged_workdir(path: Path) -> Iterator[Path]:
    """A fresh folder beside ``path`` to build the run in; on success it becomes ``path``.

    On an error the staging folder is removed and ``path`` (an earlier run, if any) is left
    as it was: the work dir is complete or untouched, never half-written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.partial-", dir=path.parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = None
    if path.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{path.name}.replaced-", dir=path.parent))
        path.replace(old / path.name)
    staging.replace(path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _load_tasks(opts: RunOptions) -> list[dict[str, Any]]:
    """The run's tasks, each checked (``as_task``) before anything is written.

    Raises:
        InvalidRequestError: the file cannot be read, a line is not JSON or not a task.
    """
    if not opts.tasks_file:
        return small_countdown_puzzles(opts.tasks, seed=opts.seed)
    try:
        text = Path(opts.tasks_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidRequestError(f"--tasks-file {opts.tasks_file}: {e}", field="tasks_file") from e
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise InvalidRequestError(f"{opts.tasks_file}:{n}: not JSON: {e}") from e
            if isinstance(obj, dict) and "domain" not in obj and isinstance(obj.get("task"), dict):
                obj = obj["task"]  # a record (a fork-tree line) that carries its task object
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)  # the flat form is read
                    as_task(obj)
            except (ValueError, TypeError) as e:
                raise InvalidRequestError(f"{opts.tasks_file}:{n}: not a task: {e}") from e
            out.append(obj)
    if not out:
        raise InvalidRequestError(f"{opts.tasks_file}: no tasks", field="tasks_file")
    return out


def run_main_job(
    opts: RunOptions,
    sampler: Sampler | None = None,
    *,
    as_json: bool = False,
    make_sampler: Callable[[], Sampler] | None = None,
) -> int:
    """Run the main job; print the summary; return 0 when the ledger audits clean.

    Every input is checked before anything is written (and before ``make_sampler`` loads a
    model); the run is built in a staging folder that replaces ``opts.workdir`` only when
    the run completes (``staged_workdir``).

    Raises:
        InvalidRequestError: a bad input, or a work dir that may not be replaced.
    """
    started = time.perf_counter()
    check_workdir(opts.workdir, force=opts.force)
    if opts.server and not opts.trust:
        raise InvalidRequestError("--trust is required with --server", field="trust")
    tasks = _load_tasks(opts)
    if sampler is None:
        if make_sampler is None:
            raise ValueError("run_main_job needs a sampler or make_sampler")
        sampler = make_sampler()
    with staged_workdir(opts.workdir) as staging:
        data, address, ok = _run_in(replace(opts, workdir=staging), sampler, tasks, started)
        data["summary"]["report"] = str(opts.workdir / "report" / "index.html")
        (staging / "summary.json").write_text(json.dumps(data["summary"], indent=1) + "\n")
    print(json.dumps(data["summary"]) if as_json else screen(data["summary"], address))
    return 0 if ok else 1


def _run_in(
    opts: RunOptions, sampler: Sampler, tasks: list[dict[str, Any]], started: float
) -> tuple[dict[str, Any], str, bool]:
    """The run inside ``opts.workdir`` (the staging folder): (report data, address, ok)."""
    workdir = opts.workdir
    local = None if opts.server else LocalCertd(workdir / "certd-data")
    address = opts.server or (local.address if local else "")
    trust = opts.trust or ([local.vkey] if local else [])
    try:
        (workdir / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
        with CertdClient(address, trusted_keys=trust) as client:
            measured = _measure(opts, client, sampler, tasks, trust)
        state = ["--state", str(workdir / "auditor-state.json")]
        keys = [a for t in trust for a in ("--trust", t)]
        audit = {"grpc": _audit(["--server", address, *keys, *state])}
    finally:
        if local is not None:
            local.stop()
    if local is not None:
        audit["files"] = _audit(
            ["--data-dir", str(local.data_dir), "--state", str(workdir / "offline-state.json")]
        )
    data = report_data(opts, measured, audit)
    data["summary"]["seconds"] = round(time.perf_counter() - started, 1)
    from .report import write_report

    write_report(workdir / "report", data)
    ok = all(a["ok"] for a in audit.values()) and not measured.refused
    return data, address, ok


def _measure(
    opts: RunOptions,
    client: CertdClient,
    sampler: Sampler,
    tasks: list[dict[str, Any]],
    trust: Sequence[str],
) -> Measured:
    """Evaluation sampling, fork trees, stratified groups and the ratchet, against one certd."""
    t0 = time.perf_counter()
    rows = evaluate_tasks(
        client,
        sampler,
        tasks,
        k=opts.k,
        max_tokens=opts.max_tokens,
        temperature=opts.temperature,
        top_p=opts.top_p,
        seed=opts.seed,
        progress=opts.progress,
    )
    eval_s = time.perf_counter() - t0
    builder = ForkTreeBuilder(
        client,
        sampler,
        m=opts.m,
        budget=opts.budget,
        round_size=opts.round_size,
        max_tokens=opts.max_tokens,
        temperature=opts.temperature,
        force_prefix=True,
        prefix_template=opts.prefix_template,
        seed=opts.seed,
    )
    records = builder.run(tasks, opts.workdir / "forktrees.jsonl")
    groups = group_stats(rows)
    admitted, refused, signed = _admit(opts, client, trust, records)
    size = client.checkpoint().size
    return Measured(
        tasks, rows, records, admitted, signed, groups, len(admitted), refused, size, eval_s
    )


def _admit(
    opts: RunOptions,
    client: CertdClient,
    trust: Sequence[str],
    records: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], SignedCounts]:
    """The ratchet over the fork-tree records: admitted ones, re-emitted from their verified
    values, to ``admitted.jsonl``; the refusals; the family counts the admitted records'
    certificates sign (verified again through the one verifier: the report's counts)."""
    from ..cli_io import trust_arg
    from ..ratchet import Ratchet
    from ..ratchet_records import reemit

    ratchet = Ratchet(
        list(trust),
        kappas={KAPPA},
        consistency=lambda a, b: client.consistency_proof(a, b).hashes,
    )
    admitted: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    shown = opts.progress is not False
    with (
        (opts.workdir / "admitted.jsonl").open("w", encoding="utf-8") as sink,
        Progress("ratchet", unit="records", total=len(records), enabled=shown) as bar,
    ):
        for n, rec in enumerate(bar.track(records)):
            if not rec["families"]:
                continue
            adm = ratchet.admit(rec)
            if adm.admitted:
                admitted.append(reemit(rec))
                sink.write(json.dumps(admitted[-1], sort_keys=True) + "\n")
            else:
                refused.append({"record": n, "reasons": [[r.value, d] for r, d in adm.reasons]})
    return admitted, refused, signed_counts(enumerate(admitted, 1), trust_arg(list(trust)))


def _audit(args: list[str]) -> dict[str, Any]:
    """``certd audit --json ARGS`` in a child process: ok, size and faults."""
    run = subprocess.run(
        [sys.executable, "-m", "certd.cli", "audit", "--json", *args],
        capture_output=True,
        text=True,
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
