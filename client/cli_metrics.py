"""``forkgate metrics``: coverage figures of a fork-tree file, counted from what certd signed.

Example::

    forkgate metrics --in forktrees.jsonl --trust certd-data/signing.pub --json

Every figure that a certificate can speak for is taken from the certificates' signed
payloads, never from a record's own fields: the certified families of a task are the
distinct labels its certificates sign, and its feasible count is the enumeration certd signs
into them (``predicate.feasible.labels``; for a domain without enumeration, the certified
families). coverage = distinct certified families ÷ signed feasible labels, so editing a
record's ``feasible_labels`` or listing a certificate twice moves nothing: a record listing
one family twice is refused (exit 1). With ``--trust`` every certificate is verified first
(exit 1 when one does not); without it the payloads are read as signed but unchecked.
``samples``, ``tokens``, ``complete_tasks``, ``forced_families`` and the solution coverage
(distinct canonical solutions ÷ correct solutions, from the ``solution_counts`` a record
keeps, ``forkgate.coverage_metrics``) are run statistics that nothing signs; they are summed
as written.

Exit codes (docs/exit-codes.md): 0 reported; 1 a certificate that does not parse or verify,
a record that lists a family twice, or a record whose task is malformed or carries a field
its domain does not define; 2 usage (not a fork-tree file, a bad ``--trust``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from certd.errors import CertdError
from certd.exitcodes import EXIT_OK, EXIT_REFUSED

from .cli_io import read_jsonl_numbered, trust_arg
from .coverage_metrics import solution_coverage_of_rows
from .errors import InvalidRequestError
from .signed_counts import signed_counts
from .tasks import as_task

__all__ = ["add_parser"]


def _records(path: str) -> list[tuple[int, dict[str, Any]]]:
    """The records of a ``build-forktrees`` file (a usage error naming the line when a line is
    not one, e.g. a verify-batch verdict line).

    Raises:
        InvalidRequestError: a line is not a fork-tree record.
        ValueError: a record's task is malformed or has a field its domain does not define
            (``MALFORMED``, exit 1: the one rule of ``certd.task_object``).
    """
    out = []
    for n, rec in read_jsonl_numbered(path):
        families = rec.get("families") if isinstance(rec, dict) else None
        if not isinstance(families, list) or not all(isinstance(f, dict) for f in families):
            verdict = isinstance(rec, dict) and "status" in rec
            hint = " (this looks like verify-batch output)" if verdict else ""
            raise InvalidRequestError(
                f'{path}:{n}: not a fork-tree record (no "families" list){hint}; '
                "metrics reads the output of forkgate build-forktrees",
                field="in",
            )
        if "task" in rec:
            try:
                as_task(rec["task"])
            except ValueError as e:
                raise ValueError(f"line {n}: MALFORMED task: {e}") from e
        out.append((n, rec))
    return out


def _cmd_metrics(args: argparse.Namespace) -> int:
    keys = trust_arg(args.trust)
    try:
        records = _records(args.input)
        counts = signed_counts(records, keys)
        certified, signed = counts.certified, counts.feasible_labels
    except (ValueError, CertdError) as e:
        print(json.dumps({"ok": False, "error": str(e)}) if args.json else f"refused: {e}")
        return EXIT_REFUSED
    families = sum(len(labels) for labels in certified.values())
    feasible = sum(signed.get(d, len(labels)) for d, labels in certified.items())
    recs = [r for _, r in records]
    info = {
        "tasks": len(recs),
        "families_certified": families,
        "feasible_labels": feasible,
        "coverage": round(families / feasible, 4) if feasible else None,
        "complete_tasks": sum(bool(r.get("complete")) for r in recs),
        "forced_families": sum(bool(f.get("forced")) for r in recs for f in r["families"]),
        "samples": sum(r.get("samples", 0) for r in recs),
        **solution_coverage_of_rows(recs),
        "tokens": sum(r.get("tokens", 0) for r in recs),
    }
    print(json.dumps(info) if args.json else "\n".join(f"{k:18} {v}" for k, v in info.items()))
    return EXIT_OK


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``metrics`` to the ``forkgate`` command line (``sub``: its subparsers); return it."""
    mt: argparse.ArgumentParser = sub.add_parser(
        "metrics", help="coverage figures of a fork-tree file, from its signed certificates"
    )
    mt.add_argument(
        "--in", dest="input", required=True, help="build-forktrees output JSONL ('-' for stdin)"
    )
    mt.add_argument(
        "--trust", action="append", default=[], help="verify every certificate with this key"
    )
    mt.set_defaults(fn=_cmd_metrics)
    return mt
