"""``forkgate get-cert`` and ``forkgate fork-tree``: certificates and fork trees from certd.

Example::

    forkgate get-cert --server 127.0.0.1:50051 --id 3f2a… --trust KEY --out cert.json
    forkgate get-cert --server 127.0.0.1:50051 --index 7 --out - | forkgate check-cert - --trust KEY
    forkgate fork-tree --server 127.0.0.1:50051 \\
        --task '{"domain":"countdown","task":{"numbers":[25,5,4,3],"target":83}}' --json

Exit codes (docs/exit-codes.md): 0 found (and verified with ``--trust``); 1 a certificate
that does not verify against ``--trust``; 2 usage, or no such certificate; 3 certd
unavailable.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from google.protobuf import json_format

from certd.v1 import authority_pb2

from .cli_io import open_out, task_arg, trust_arg
from .connection import add_connection_flags, client_from_args

__all__ = ["add_parsers"]


def _cert_summary(cert: authority_pb2.Certificate) -> dict[str, Any]:
    return {
        "certificate_id": cert.certificate_id,
        "ledger_index": cert.ledger_index,
        "kappa": cert.label.kappa,
        "label": cert.label.value,
        "witness": cert.witness,
    }


def _cmd_get_cert(args: argparse.Namespace) -> int:
    with client_from_args(args, trusted_keys=trust_arg(args.trust)) as client:
        if args.id:
            cert = client.get_certificate(certificate_id=args.id)
        else:
            cert = client.get_certificate(ledger_index=args.index)
    doc = json_format.MessageToDict(cert)
    if args.out:
        with open_out(args.out) as sink:
            sink.write(json.dumps(doc, indent=1) + "\n")
    s = _cert_summary(cert)
    checked = " (verified)" if args.trust else ""
    print(
        json.dumps({**s, "verified": bool(args.trust)})
        if args.json
        else f"certificate {s['certificate_id']} at ledger index {s['ledger_index']}: "
        f"{s['kappa']} label {s['label']}{checked}"
        f"{' -> ' + args.out if args.out and args.out != '-' else ''}",
        file=sys.stderr if args.out == "-" else sys.stdout,
    )
    return 0


def _cmd_fork_tree(args: argparse.Namespace) -> int:
    task = task_arg(args.domain, args.task)
    with client_from_args(args, trusted_keys=trust_arg(args.trust)) as client:
        tree = client.get_fork_tree(task, kappa=args.kappa)
    labels = [_cert_summary(c) for c in tree.certificates]
    doc = {
        "task_digest": tree.task_digest,
        "kappa": tree.kappa,
        "labels": labels,  # one certificate per κ label; a family is a set of labels
        "verified": bool(args.trust),
    }
    if args.out:
        with open_out(args.out) as sink:
            full = {
                **doc,
                "certificates": [json_format.MessageToDict(c) for c in tree.certificates],
            }
            sink.write(json.dumps(full) + "\n")
    if args.json:
        print(json.dumps(doc), file=sys.stderr if args.out == "-" else sys.stdout)
        return 0
    lines = [
        f"fork tree of task {tree.task_digest[:16]}… under {tree.kappa or '(default κ)'}: "
        f"{len(labels)} certified {'label' if len(labels) == 1 else 'labels'}"
        + (" (verified)" if args.trust else "")
    ]
    lines += [
        f"  {f['label']:12} {f['witness']}  (ledger index {f['ledger_index']})" for f in labels
    ]
    print("\n".join(lines), file=sys.stderr if args.out == "-" else sys.stdout)
    return 0


def add_parsers(sub: Any) -> list[argparse.ArgumentParser]:
    """Add ``get-cert`` and ``fork-tree`` to ``forkgate`` (``sub``: its subparsers)."""
    g = sub.add_parser(
        "get-cert",
        help="fetch a certificate (GetCertificate) by id or ledger index",
        description="Fetch a feasibility certificate with a fresh inclusion proof. Output: "
        "the certificate JSON that `forkgate check-cert` reads (--out), and a summary line.",
    )
    add_connection_flags(g)
    which = g.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", default="", help="the certificate id (hex SHA-256 of its envelope)")
    which.add_argument("--index", type=int, help="its ledger index")
    g.add_argument("--trust", action="append", default=[], help="verify it offline with this key")
    g.add_argument("--out", default="", help="write the certificate JSON here ('-': stdout)")
    g.set_defaults(fn=_cmd_get_cert)

    f = sub.add_parser(
        "fork-tree",
        help="the certified labels of a task (GetForkTree)",
        description="List a task's certified labels (one certificate per κ label; a family "
        "is a set of labels, see `certd families`). "
        'Input: --task, a task object {"domain": …, "task": {…}} (docs/formats.md §0).',
    )
    add_connection_flags(f)
    f.add_argument("--task", required=True, help='the task object {"domain": …, "task": {…}}')
    f.add_argument("--domain", default="", help="the domain, when --task is the bare task")
    f.add_argument("--kappa", default="", help="the κ (default: the domain's)")
    f.add_argument("--trust", action="append", default=[], help="verify every certificate")
    f.add_argument(
        "--out", default="", help="write the tree with full certificates as JSON ('-': stdout)"
    )
    f.set_defaults(fn=_cmd_fork_tree)
    return [g, f]
