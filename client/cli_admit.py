"""``forkgate admit``: keep only the fork-tree records and stratified groups whose certificates
and receipts verify, through a ratchet whose trusted state persists between runs.

Example::

    forkgate admit --trust certd-data/signing.pub --server 127.0.0.1:50051 \\
        --in forktrees.jsonl --out admitted.jsonl

Exit codes (docs/exit-codes.md): 0 every record admitted (or ``--allow-refused``); 1 a record
was refused; 2 usage or unreadable input; 3 certd unavailable.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from certd.exitcodes import EXIT_OK, EXIT_REFUSED

from .cli_io import open_out, trust_arg
from .connection import add_connection_flags, connection_from_args
from .errors import InvalidRequestError, VerificationError

__all__ = ["add_parser", "default_ratchet_state"]


def default_ratchet_state(log: str) -> Path:
    """Where ``forkgate admit`` keeps a log's ratchet state by default.

    ``$XDG_STATE_HOME/forkgate/ratchet-<hash of the log's key ids and origin>.json``
    (``~/.local/state`` when unset), beside ``certd audit``'s auditor state.
    """
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "forkgate" / f"ratchet-{hashlib.sha256(log.encode()).hexdigest()[:16]}.json"


def _cmd_admit(args: argparse.Namespace) -> int:
    from .certified import CertifiedDataset
    from .ratchet import Ratchet
    from .ratchet_records import reemit

    if not Path(args.input).is_file():
        raise InvalidRequestError(f"--in: no such file {args.input}", field="in")
    keys = trust_arg(args.trust)
    assert keys is not None  # --trust is required
    conn = connection_from_args(args)
    client = conn.client() if conn is not None else None
    try:
        ratchet = Ratchet(
            keys,
            kappas=set(args.kappa),
            consistency=(lambda a, b: client.consistency_proof(a, b).hashes) if client else None,
        )
        state = Path(args.state) if args.state else default_ratchet_state(ratchet.state.log)
        if not args.no_state:
            try:
                ratchet.load_state(state)
            except VerificationError as e:  # not a state file, or another log's: usage
                raise InvalidRequestError(f"--state: {e}", field="state") from e
        data = CertifiedDataset.from_jsonl(Path(args.input), ratchet)
        with open_out(args.out) as sink:
            admitted = 0
            for record in data:
                sink.write(json.dumps(reemit(record), sort_keys=True) + "\n")
                admitted += 1
        if not args.no_state:
            ratchet.save_state(state)
    finally:
        if client is not None:
            client.close()
    refused: list[dict[str, Any]] = [
        {"line": data.line_numbers[n], "reasons": [[r.value, d] for r, d in a.reasons]}
        for n, a in data.refused
    ]
    print(
        json.dumps(
            {
                "admitted": admitted,
                "refused": refused,
                "state": None if args.no_state else str(state),
            }
        )
        if args.json
        else "\n".join(
            [f"admitted {admitted}, refused {len(refused)}"]
            + [
                f"  line {x['line']}: "
                + "; ".join(f"{code} ({detail})" for code, detail in x["reasons"])
                for x in refused
            ]
        )
    )
    return EXIT_REFUSED if refused and not args.allow_refused else EXIT_OK


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``admit`` to the ``forkgate`` command line (``sub``: its subparsers); return it."""
    a: argparse.ArgumentParser = sub.add_parser(
        "admit",
        help="keep only fork-tree records and stratified groups whose certificates and "
        "receipts verify",
    )
    a.add_argument("--trust", action="append", required=True)
    a.add_argument("--kappa", action="append", default=["countdown.first-op.v1"])
    add_connection_flags(
        a, default=None, help="certd, for consistency proofs a file does not carry"
    )
    a.add_argument("--in", dest="input", required=True)
    a.add_argument("--out", required=True)
    a.add_argument(
        "--state",
        default="",
        help="the ratchet's trusted-state file (default: under $XDG_STATE_HOME/forkgate, "
        "one per log); successive runs only move forward",
    )
    a.add_argument("--no-state", action="store_true", help="start fresh and keep nothing")
    a.add_argument(
        "--allow-refused", action="store_true", help="exit 0 even when records were refused"
    )
    a.set_defaults(fn=_cmd_admit)
    return a
